//! mkfs.ext4r: mke2fs's command line over `ext4r::mkfs`.

mod fit;
mod talk;

use anyhow::{bail, Context, Result};
use clap::builder::{PossibleValue, TypedValueParser};
use clap::Parser;
use ext4r::device::{BlockDevice, FileDevice, OpenMode};
use ext4r::mkfs::{self, Extended, MkfsOptions, Summary};
use ext4r_format::num;
use std::ffi::{OsStr, OsString};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

/// Any text, with the values a shell completes offered (mke2fs takes
/// other `-t` types too: an undefined one stops it unless forced).
#[derive(Clone)]
struct Offered(&'static [&'static str]);

impl TypedValueParser for Offered {
    type Value = String;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> std::result::Result<String, clap::Error> {
        clap::builder::StringValueParser::new().parse_ref(cmd, arg, value)
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(self.0.iter().map(|v| PossibleValue::new(*v))))
    }
}

/// Make an ext2/ext3/ext4 filesystem (options as mke2fs(8)).
///
/// Where mke2fs warns, mkfs.ext4r warns in its words; where it asks
/// "Proceed anyway? (y,N)" (a block size above the page size, an existing
/// filesystem on a terminal) it asks on standard output and reads the
/// answer from standard input: without one (no terminal, end of input) it
/// stops with exit 1. -F goes on without asking; a mounted device needs
/// -F twice. A refused or failed run leaves no file it created.
#[derive(Parser, Debug)]
#[command(name = "mkfs.ext4r", version, disable_version_flag = true)]
struct Args {
    /// Filesystem type: ext2, ext3 or ext4 (default ext4).
    #[arg(short = 't', value_parser = Offered(&["ext2", "ext3", "ext4"]))]
    fs_type: Option<String>,
    /// Usage types, comma-separated.
    #[arg(
        short = 'T',
        value_parser = Offered(&[
            "small", "floppy", "big", "huge", "news", "largefile", "largefile4", "hurd",
        ])
    )]
    usage_types: Option<String>,
    /// Block size in bytes (1024, 2048, 4096, ...).
    #[arg(short = 'b')]
    block_size: Option<String>,
    /// Cluster size in bytes (bigalloc).
    #[arg(short = 'C')]
    cluster_size: Option<String>,
    /// Bytes per inode.
    #[arg(short = 'i')]
    inode_ratio: Option<String>,
    /// Inode size in bytes.
    #[arg(short = 'I')]
    inode_size: Option<u16>,
    /// Number of inodes.
    #[arg(short = 'N')]
    num_inodes: Option<u64>,
    /// Reserved blocks percentage.
    #[arg(short = 'm')]
    reserved_ratio: Option<f64>,
    /// Blocks per group.
    #[arg(short = 'g')]
    blocks_per_group: Option<u32>,
    /// Groups per flex group.
    #[arg(short = 'G')]
    flex_bg_size: Option<u32>,
    /// Volume label.
    #[arg(short = 'L')]
    label: Option<String>,
    /// Last mounted directory.
    #[arg(short = 'M')]
    last_mounted: Option<String>,
    /// UUID: a UUID, clear, random or time.
    #[arg(short = 'U')]
    uuid: Option<String>,
    /// Features to set or (with ^) clear, comma-separated.
    #[arg(short = 'O')]
    features: Vec<String>,
    /// Extended options, comma-separated (as mke2fs, the last -E wins).
    #[arg(short = 'E', overrides_with = "extended")]
    extended: Option<String>,
    /// Journal options (size=MiB, fast_commit_size=KiB).
    #[arg(short = 'J')]
    journal: Option<String>,
    /// Create a journal (ext3).
    #[arg(short = 'j')]
    journal_default: bool,
    /// Error behaviour: continue, remount-ro, panic.
    #[arg(short = 'e')]
    errors: Option<String>,
    /// Creator OS.
    #[arg(short = 'o')]
    creator_os: Option<String>,
    /// Revision (0 or 1).
    #[arg(short = 'r')]
    revision: Option<u32>,
    /// Force: go on without asking; twice also on a mounted device.
    #[arg(short = 'F', action = clap::ArgAction::Count)]
    force: u8,
    /// Quiet.
    #[arg(short = 'q')]
    quiet: bool,
    /// Dry run: print what would be made, write nothing.
    #[arg(short = 'n')]
    dry_run: bool,
    /// Verbose.
    #[arg(short = 'v')]
    verbose: bool,
    /// Print the version and exit (on standard error, as mke2fs -V).
    #[arg(short = 'V', long = "version")]
    version: bool,
    /// Copy the files of a directory, a tar archive or (with `-`) a tar
    /// archive on standard input into the new filesystem.
    #[arg(short = 'd', value_name = "SOURCE")]
    root_dir: Option<PathBuf>,
    /// Check for bad blocks (not supported).
    #[arg(short = 'c', action = clap::ArgAction::Count, hide = true)]
    badblocks: u8,
    /// Device or image file.
    device: Option<PathBuf>,
    /// Filesystem size: blocks, or with a K/M/G/T/P suffix. With -d also
    /// `min`: the smallest image file that holds SOURCE (what
    /// `resize.ext4r -M` reaches after filling it), or `min+N%` /
    /// `min+SIZE` with that much free room added; a new image file filled
    /// with -d and no size gets `min`. An existing file is cut to it; a
    /// block device is refused.
    size: Option<String>,
}

/// The command line's definition (for the man page and completions).
pub(crate) fn command() -> clap::Command {
    <Args as clap::CommandFactory>::command()
}

/// Runs mkfs.ext4r with `args` (args[0] is the program name).
pub(crate) fn main(args: Vec<OsString>) -> ExitCode {
    let a = match Args::try_parse_from(args) {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 1 } else { 0 });
        }
    };
    match run(a) {
        Ok(()) => ExitCode::SUCCESS,
        // A no to a question, or an abort mke2fs makes unless forced: what
        // was said before it is all mke2fs says.
        Err(e)
            if e.is::<talk::Said>()
                || matches!(e.downcast_ref(), Some(ext4r::Error::Cancelled(_))) =>
        {
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("mkfs.ext4r: {}", crate::errors::message(e.as_ref()));
            ExitCode::from(1)
        }
    }
}

fn parse_size(s: &str, unit: u64) -> Result<u64> {
    Ok(mkfs::parse_size(s, unit)?)
}

/// `SOURCE_DATE_EPOCH`, when set to a number: a reproducible build.
fn source_date_epoch() -> Option<i64> {
    std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|v| v.trim().parse::<i64>().ok())
}

fn now() -> i64 {
    for var in ["E2FSPROGS_FAKE_TIME", "SOURCE_DATE_EPOCH"] {
        if let Some(t) = std::env::var(var)
            .ok()
            .and_then(|v| v.trim().parse::<i64>().ok())
        {
            return t;
        }
    }
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// A "Proceed anyway?" answered no.
fn declined(what: &str) -> anyhow::Error {
    ext4r::Error::Cancelled(what.to_string()).into()
}

fn run(a: Args) -> Result<()> {
    if a.version {
        // mke2fs -V's two lines; the tools and the library share a version.
        let v = env!("CARGO_PKG_VERSION");
        eprintln!("mkfs.ext4r {v}\n\tUsing ext4r library version {v}");
        return Ok(());
    }
    if a.badblocks > 0 {
        bail!("bad block scanning (-c) is not supported; run badblocks(8) separately");
    }
    let device = a
        .device
        .clone()
        .context("no device specified (usage: mkfs.ext4r [options] device [fs-size])")?;
    if !a.quiet {
        eprintln!("mkfs.ext4r {}", env!("CARGO_PKG_VERSION"));
    }
    let ext = Extended::parse(a.extended.as_slice())?;
    // A source that cannot be read is refused before anything is written.
    let source = a
        .root_dir
        .as_deref()
        .map(crate::populate::Source::check)
        .transpose()?;
    let epoch = source_date_epoch();
    let block_size = a
        .block_size
        .as_deref()
        .map(|s| parse_size(s, 1))
        .transpose()?;
    // A block count is in blocks of the size mke2fs will use: the power of
    // two at or below -b.
    let unit = block_size.map_or(1024, |b| 1024u64 << (63 - (b >> 10).max(1).leading_zeros()));
    // `min` (or a missing size for a new image filled with -d): the
    // smallest image that holds the tree, see fit.rs.
    let mut min = a
        .size
        .as_deref()
        .map(|s| fit::parse_min(s, unit))
        .transpose()?
        .flatten();
    let size_arg = match a.size.as_deref() {
        Some(_) if min.is_some() => None,
        // mke2fs: a size that reads as no blocks, or not as a size at all.
        Some(s) => match mkfs::parse_size(s, unit) {
            Ok(n) if n > 0 => Some(n),
            _ => bail!("invalid blocks '{s}' on device '{}'", device.display()),
        },
        None => None,
    };
    let mut journal_fc_size_kib = None;
    let journal_size_mib = if let Some(j) = &a.journal {
        let mut size = Some(0);
        for opt in j.split(',') {
            match opt.split_once('=') {
                Some(("size", v)) => size = Some(v.parse::<u32>().context("bad journal size")?),
                Some(("fast_commit_size", v)) => {
                    journal_fc_size_kib = Some(v.parse::<u32>().context("bad fast commit size")?);
                }
                _ => bail!("Bad journal option: {opt} (size= and fast_commit_size= are supported)"),
            }
        }
        size
    } else if a.journal_default {
        Some(0)
    } else {
        None
    };

    // As mke2fs's check_mount, in its words: only -F twice goes on over a
    // mounted device.
    if ext4r::safety::mounted(&device)?.is_some() {
        let d = device.display();
        if a.force < 2 {
            return Err(talk::refuse(format!(
                "{d} is mounted; will not make a filesystem here!"
            )));
        }
        eprintln!("{d} is mounted; mkfs.ext4r forced anyway.  Hope /etc/mtab is incorrect.");
    }
    let exists = device.exists();
    // mke2fs refuses a missing file without a size; with -d the tree
    // gives one.
    if !exists && a.size.is_none() && source.is_some() {
        min = Some(fit::Slack::None);
    }
    if min.is_some() && source.is_none() {
        bail!(
            "the size `min` needs -d SOURCE: it is the smallest size that holds the tree \
             copied in"
        );
    }
    if !exists && size_arg.is_none() && min.is_none() {
        return Err(talk::refuse(format!(
            "The file {} does not exist and no size was specified.",
            device.display()
        )));
    }
    // Look first, write later: the device is opened read-only to learn its
    // size, and nothing is created, grown or written until the whole plan
    // stands (mke2fs refuses with the image untouched; so must we).
    let dev: Option<FileDevice> = exists
        .then(|| FileDevice::open(&device, OpenMode::default()))
        .transpose()?;
    let dev_size = dev.as_ref().map_or(0, |d| d.size());
    if min.is_some() && dev.as_ref().is_some_and(FileDevice::is_block_device) {
        bail!(
            "{}: a block device cannot be cut to the smallest size; give no size to fill \
             the whole device, or make an image file with `min` and copy it",
            device.display()
        );
    }
    // Measured before anything is written: a source that cannot be read
    // (or standard input) is refused with the device untouched.
    let tree = match (&min, &source) {
        (Some(_), Some(src)) => Some(fit::measure(src)?),
        _ => None,
    };
    let size_bytes = match size_arg {
        // Set from the tree below.
        None if min.is_some() => 0,
        Some(s) => {
            // mke2fs 1.47 would ask here but never does (it learns that
            // the target is a device only later); a device cannot grow, so
            // the write would fail: refused before anything is written.
            if dev
                .as_ref()
                .is_some_and(|d| d.is_block_device() && s > dev_size)
            {
                bail!("Filesystem larger than apparent device size.");
            }
            s
        }
        None => {
            if dev_size == 0 {
                bail!(
                    "Device size reported to be zero.  Invalid partition specified, or\n\t\
                     partition table wasn't reread after running fdisk, due to\n\t\
                     a modified partition being busy and in use.  You may need to reboot\n\t\
                     to re-read your partition table.\n"
                );
            }
            // Whole pages, as mke2fs rounds the device size.
            dev_size & !4095
        }
    };
    // mke2fs keeps -b, -C and -i in an int: the low 32 bits are what it
    // goes on to check (a value out of range is refused there).
    let mut opts = MkfsOptions {
        fs_type: a.fs_type.clone(),
        usage_types: a.usage_types.clone(),
        block_size: block_size.map(num::lo32),
        cluster_size: a
            .cluster_size
            .as_deref()
            .map(|s| parse_size(s, 1))
            .transpose()?
            .map(num::lo32),
        inode_ratio: a
            .inode_ratio
            .as_deref()
            .map(|s| parse_size(s, 1))
            .transpose()?
            .map(num::lo32),
        inode_size: a.inode_size,
        num_inodes: a.num_inodes,
        reserved_ratio: a.reserved_ratio,
        blocks_per_group: a.blocks_per_group,
        flex_bg_size: a.flex_bg_size,
        features: a.features.clone(),
        journal_size_mib,
        journal_fc_size_kib,
        errors: a.errors.clone(),
        creator_os: a.creator_os.clone(),
        label: a.label.clone(),
        last_mounted: a.last_mounted.clone(),
        uuid: a.uuid.clone(),
        revision: a.revision,
        extended: ext.clone(),
        size_bytes,
        sector_size: dev.as_ref().map_or(512, |d| d.logical_sector_size()),
        now: now(),
        // SOURCE_DATE_EPOCH: the UUID and hash seed follow from it (-U and
        // -E hash_seed= still win), as everything else written does.
        random_uuids: Some(epoch.map_or_else(
            || {
                (
                    *uuid::Uuid::new_v4().as_bytes(),
                    *uuid::Uuid::new_v4().as_bytes(),
                )
            },
            mkfs::reproducible_ids,
        )),
    };
    let inodes_chosen = a.num_inodes.is_some() || a.inode_ratio.is_some();
    if let Some(t) = &tree {
        fit::size_options(&mut opts, t, inodes_chosen)?;
    }
    let plan = mkfs::plan_with(&opts, &mut |n| talk::notice(n, a.force, a.quiet))?;
    // The library's resize does not shrink bigalloc yet: refused before
    // anything is written rather than after the copy.
    if min.is_some() && plan.summary().cluster_size > u64::from(plan.summary().block_size) {
        bail!("the size `min` cannot be reached with bigalloc (its shrink is not supported yet): give a size");
    }
    if a.dry_run {
        print_summary(&plan.summary(), a.verbose);
        if min.is_some() {
            println!("(filled, then cut to the smallest size that holds the tree)");
        }
        return Ok(());
    }
    let size_arg = if min.is_some() {
        Some(opts.size_bytes)
    } else {
        size_arg
    };
    // As mke2fs: only at a terminal (a script's mkfs is not stopped), and
    // not with -F.
    if let Some(d) = &dev {
        if a.force == 0 && std::io::stdin().is_terminal() && std::io::stdout().is_terminal() {
            if let Some(existing) = ext4r::safety::probe(d)? {
                match existing {
                    ext4r::safety::Existing::PartitionTable(kind) => {
                        eprintln!("Found a {kind} partition table in {}", device.display());
                    }
                    e => println!("{} {}", device.display(), e.describe()),
                }
                if !talk::proceed() {
                    return Err(declined("existing filesystem"));
                }
            }
        }
    }
    let is_file = !dev.as_ref().is_some_and(FileDevice::is_block_device);
    drop(dev);
    if !exists && !a.quiet {
        println!("Creating regular file {}", device.display());
    }
    // Made only now that every check passed, and removed again if the
    // rest fails.
    let created = if exists {
        None
    } else {
        Some(talk::Created::new(&device).with_context(|| format!("{}", device.display()))?)
    };
    let dev = FileDevice::open(
        &device,
        OpenMode {
            write: true,
            exclusive: true,
            create_size: size_arg,
            lock_wait: None,
        },
    )
    .map_err(|e| match e {
        ext4r::Error::InUse(p) => talk::refuse(format!(
            "{} is apparently in use by the system; will not make a filesystem here!",
            p.display()
        )),
        ext4r::Error::Open { path, source } if size_arg.is_some() => {
            // Most often the host filesystem cannot hold a file this large
            // (EFBIG) or has no room (ENOSPC).
            anyhow::Error::new(source).context(format!(
                "cannot make {} {} bytes long",
                path.display(),
                size_arg.unwrap_or(0)
            ))
        }
        ext4r::Error::Locked { path, holder } => talk::refuse(format!(
            "{} is in use by {holder}; will not make a filesystem here!",
            path.display()
        )),
        e => e.into(),
    })?;
    let s = plan.write(&dev, is_file)?;
    if !a.quiet {
        if s.discarded {
            println!("Discarding device blocks: done");
        }
        print_summary(&s, a.verbose);
        println!("Allocating group tables: done");
        println!("Writing inode tables: done");
        if s.journal_blocks > 0 {
            println!("Creating journal ({} blocks): done", s.journal_blocks);
        }
    }
    if let Some(src) = &source {
        if !a.quiet {
            print!("Copying files into the device: ");
            std::io::stdout().flush()?;
        }
        let mut dev = dev;
        let mut tries = 0;
        loop {
            match crate::populate::populate(dev, src, &ext, epoch) {
                Ok(()) => break,
                // The tree was measured short: made again twice as large
                // (the final size is the shrink's, not this one).
                Err(e) if min.is_some() && tries < 4 && fit::out_of_room(&e) => {
                    tries += 1;
                    let inodes = u64::from(plan_inodes(&opts)?);
                    opts.size_bytes *= 2;
                    if !inodes_chosen || opts.num_inodes.is_some() {
                        opts.num_inodes = Some(inodes * 2);
                    }
                    let plan = mkfs::plan(&opts)?;
                    dev = FileDevice::open(
                        &device,
                        OpenMode {
                            write: true,
                            exclusive: true,
                            create_size: Some(opts.size_bytes),
                            lock_wait: None,
                        },
                    )?;
                    plan.write(&dev, is_file)?;
                }
                Err(e) => return Err(e.context("while populating file system")),
            }
        }
        if !a.quiet {
            println!("done");
        }
    }
    if let Some(slack) = min {
        let (blocks, bs) = fit::shrink(&device, slack, now())?;
        if !a.quiet {
            println!(
                "Cutting to the smallest size that holds the files{}: {blocks} ({}k) blocks",
                match slack {
                    fit::Slack::None => String::new(),
                    fit::Slack::Percent(p) => format!(" and {p}%"),
                    fit::Slack::Bytes(b) => format!(" and {b} bytes"),
                },
                bs / 1024
            );
        }
    }
    if !a.quiet {
        println!("Writing superblocks and filesystem accounting information: done\n");
    }
    if let Some(c) = created {
        c.keep();
    }
    Ok(())
}

/// Inodes the filesystem `opts` describes has.
fn plan_inodes(opts: &MkfsOptions) -> Result<u32> {
    Ok(mkfs::plan(opts)?.summary().inodes_count)
}

fn print_summary(s: &Summary, verbose: bool) {
    let kib = s.block_size / 1024;
    println!(
        "Creating filesystem with {} {}k blocks and {} inodes",
        s.blocks_count, kib, s.inodes_count
    );
    if verbose {
        println!(
            "fs_types for mke2fs.conf resolution: '{}'",
            s.usage_types.join("', '")
        );
        println!("Filesystem label={}", s.label);
        println!(
            "Block size={} (log={})",
            s.block_size,
            s.block_size.trailing_zeros() - 10
        );
        println!("Cluster size={}", s.cluster_size);
        println!(
            "Stride={} blocks, Stripe width={} blocks",
            s.stride, s.stripe_width
        );
        println!("{} inodes, {} blocks", s.inodes_count, s.blocks_count);
        println!(
            "{} blocks ({:.2}%) reserved for the super user",
            s.r_blocks_count,
            100.0 * s.r_blocks_count as f64 / s.blocks_count as f64
        );
        println!("First data block={}", s.first_data_block);
        println!("{} block groups", s.group_count);
        println!(
            "{} blocks per group, {} inodes per group",
            s.blocks_per_group, s.inodes_per_group
        );
        println!("Features: {}", s.features.join(" "));
    }
    // As mke2fs's show_stats: a single group ends here; otherwise the
    // UUID (unless null) and the backups, wrapped at 72 columns as mke2fs
    // wraps them (the separator before the break).
    if s.group_count == 1 {
        println!();
        return;
    }
    if s.uuid != [0; 16] {
        println!("Filesystem UUID: {}", uuid::Uuid::from_bytes(s.uuid));
    }
    print!("Superblock backups stored on blocks: ");
    let mut col_left = 0;
    for (i, b) in s.backups.iter().enumerate() {
        if i != 0 {
            print!(", ");
        }
        let need = b.to_string().len() + 2;
        if need > col_left {
            print!("\n\t");
            col_left = 72;
        }
        col_left -= need;
        print!("{b}");
    }
    println!("\n");
}
