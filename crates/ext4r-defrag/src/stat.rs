//! `-c`: e4defrag's fragmentation report, line for line (misc/e4defrag.c
//! `file_statistic` and the end of `main`), over any [`Source`].
//!
//! The lines are the ones e4defrag leaves on a terminal: it also prints
//! progress counters (`[3/120]`) and cursor-movement escapes that the next
//! line overwrites; those are left out. Messages about skipped files go to
//! the error stream, as e4defrag's do, and only with `-v`.
//!
//! After e4defrag's verdict comes one line of ours with figures to act on:
//! how many extents shorter than 1 MiB sit in files of more than one extent
//! (e4defrag's best count allows a file one extent per flex group, so its
//! score calls a file of 1 MiB pieces unfragmented), and the largest free
//! extent against the free space. With `-v` e2freefrag's histogram of free
//! extent sizes follows.

use std::io::{self, Write};

use ext4r::fs::FileKind;

use crate::error::Error;
use crate::extent::FileExtents;
use crate::score::{format_score, FileScore, Ranked, Ranking, Totals, BOUND_SCORE};
use crate::source::{Entry, LostFound, Source, Walk};

/// What the command-line argument named (e4defrag's `arg_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgKind {
    /// A device (mounted, or an unmounted device or image).
    Device,
    /// A directory.
    Directory,
    /// A regular file.
    File,
}

/// How to report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatOptions {
    /// `-v`: every file, and the histogram.
    pub verbose: bool,
    /// Whether we run as root: e4defrag only computes best counts and
    /// scores for root (others cannot read the device).
    pub root: bool,
    /// Our uid: others' files are skipped when not root.
    pub uid: u32,
}

/// One target of a `-c` run.
#[derive(Debug, Clone)]
pub struct StatTarget<'a> {
    /// The argument as given (printed in the verdict).
    pub arg: &'a [u8],
    /// What it named.
    pub kind: ArgKind,
    /// The lost+found rule for it.
    pub lost_found: LostFound,
}

/// What a `-c` run found.
#[derive(Debug, Clone, Default)]
pub struct StatSummary {
    /// Files scored (e4defrag's `succeed_cnt`); e4defrag exits 0 when some
    /// target scored a file.
    pub scored: u64,
    /// The sums.
    pub totals: Totals,
    /// Extents shorter than 1 MiB in files of more than one extent.
    pub small_extents: u64,
    /// Files holding those.
    pub small_files: u64,
    /// The files listed under `<Fragmented files>`, most fragmented first
    /// (filled when root scores a device or directory).
    pub fragmented: Vec<Ranked>,
}

const ONE_MIB: u64 = 1 << 20;

/// Runs `-c` on one target and writes the report: e4defrag's lines to
/// `out`, its per-file messages to `err`.
///
/// # Errors
/// Writing fails, or the walk cannot start.
pub fn statistic(
    src: &dyn Source,
    t: &StatTarget<'_>,
    opts: &StatOptions,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> io::Result<StatSummary> {
    let mut run = Run {
        src,
        t,
        opts,
        visited: 0,
        total: 0,
        regular: 0,
        rank: Ranking::default(),
        sum: StatSummary::default(),
        io: Ok(()),
    };
    if t.kind == ArgKind::File {
        run.total = 1;
        run.regular = 1;
    } else if opts.verbose {
        // e4defrag counts the tree first, for its "[n/total]" prefixes.
        src.walk(&mut |e| {
            run.total += 1;
            run.regular += u32::from(e.kind == FileKind::Regular);
            Walk::Continue
        })
        .map_err(to_io)?;
    }
    if t.kind != ArgKind::File {
        if opts.verbose {
            header(out, "<File>")?;
        }
        if !opts.verbose && !opts.root {
            writeln!(out, " Done.")?;
            return Ok(run.sum);
        }
    }
    src.walk(&mut |e| {
        let r = run.file(e, out, err);
        match r {
            Ok(()) => Walk::Continue,
            Err(x) => {
                run.io = Err(x);
                Walk::Stop
            }
        }
    })
    .map_err(to_io)?;
    std::mem::replace(&mut run.io, Ok(()))?;
    if t.kind != ArgKind::File && run.sum.scored != 0 && opts.root {
        if opts.verbose {
            writeln!(out)?;
        }
        header(out, "<Fragmented files>")?;
        run.sum.fragmented = run.rank.entries().to_vec();
        for (j, r) in run.rank.entries().iter().enumerate() {
            let mut line = format!("{}. ", j + 1).into_bytes();
            let p = r.path.as_bytes();
            if p.len() > 37 {
                line.extend_from_slice(p);
                line.push(b'\n');
                line.extend(format!("{:>50}/", r.score.now).bytes());
            } else {
                line.extend_from_slice(&pad(p, 37));
                line.extend(format!("{:>10}/", r.score.now).bytes());
            }
            line.extend(format!("{:<10}{:>6} KB\n", r.score.best, r.score.size_per_ext).bytes());
            out.write_all(&line)?;
        }
    }
    run.finish(out)?;
    Ok(run.sum)
}

fn to_io(e: Error) -> io::Error {
    io::Error::other(ext4r::error::chain(&e))
}

/// `%-Ns` by bytes, as printf pads.
fn pad(s: &[u8], width: usize) -> Vec<u8> {
    let mut v = s.to_vec();
    v.resize(width.max(s.len()), b' ');
    v
}

fn header(out: &mut dyn Write, first: &str) -> io::Result<()> {
    writeln!(
        out,
        "{first:<40}{:>10}/{:<10}{:>9}",
        "now", "best", "size/ext"
    )
}

struct Run<'a> {
    src: &'a dyn Source,
    t: &'a StatTarget<'a>,
    opts: &'a StatOptions,
    visited: u32,
    total: u32,
    regular: u32,
    rank: Ranking,
    sum: StatSummary,
    io: io::Result<()>,
}

impl Run<'_> {
    /// e4defrag's `file_statistic` for one entry.
    fn file(&mut self, e: &Entry, out: &mut dyn Write, err: &mut dyn Write) -> io::Result<()> {
        let verbose = self.opts.verbose;
        self.visited += 1;
        self.total = self.total.max(self.visited);
        let single = self.total == 1 && self.regular == 1;
        if verbose && single {
            writeln!(out, "<File>")?;
        }
        let skip = |err: &mut dyn Write, msg: &str| -> io::Result<()> {
            if verbose {
                err.write_all(b" \"")?;
                err.write_all(&e.path)?;
                writeln!(err, "\"\n\t{msg}")?;
            }
            Ok(())
        };
        if self.t.lost_found.contains(&e.path) {
            return skip(err, "Can not process \"lost+found\"");
        }
        if e.kind != FileKind::Regular {
            return skip(err, "File is not regular file");
        }
        if !self.opts.root && e.uid != self.opts.uid {
            return skip(
                err,
                "File is not current user's file or current user is not root",
            );
        }
        if e.size == 0 {
            return skip(err, "File size is 0");
        }
        if e.sectors == 0 {
            return skip(err, "File has no blocks");
        }
        let extents = match self.src.extents(e) {
            Ok(x) => x,
            Err(x) => {
                let what = match &x {
                    Error::Io { what: "open", .. } => "Failed to open",
                    _ => "Failed to get file extents",
                };
                let why = match &x {
                    Error::Io { source, .. } => strerror(source),
                    other => other.to_string(),
                };
                return skip(err, &format!("{what}:{why}"));
            }
        };
        if extents.count() == 0 {
            // e4defrag's get_file_extents fails on a file FIEMAP maps nothing of.
            return skip(err, "Failed to get file extents:Invalid argument");
        }
        let bs = u64::from(self.src.block_size());
        let score = FileScore::new(
            &self.src.best_rule(),
            extents.count(),
            extents.physical_count(),
            extents.blocks(),
            bs,
        );
        let root = self.opts.root;
        if root {
            self.sum.totals.add(&score);
        }
        self.count_small(&extents, bs);
        if single {
            if verbose {
                for (i, x) in extents.as_slice().iter().enumerate() {
                    writeln!(
                        out,
                        "[ext {}]:\tstart {}:\tlogical {}:\tlen {}",
                        i + 1,
                        x.physical,
                        x.logical,
                        x.len
                    )?;
                }
            } else {
                header(out, "<File>")?;
                out.write_all(&file_line(&e.path, 40, &score, root))?;
            }
            self.sum.scored += 1;
            return Ok(());
        }
        if verbose {
            let mut msg = format!("[{}/{}]", self.visited, self.total).into_bytes();
            msg.extend_from_slice(&e.path);
            out.write_all(&file_line(&msg, 40, &score, root))?;
        }
        if root {
            self.rank.offer(&e.display(), &score);
        }
        self.sum.scored += 1;
        Ok(())
    }

    fn count_small(&mut self, extents: &FileExtents, bs: u64) {
        if extents.count() <= 1 {
            return;
        }
        let small = extents
            .as_slice()
            .iter()
            .filter(|x| x.len.saturating_mul(bs) < ONE_MIB)
            .count() as u64;
        if small != 0 {
            self.sum.small_extents += small;
            self.sum.small_files += 1;
        }
    }

    /// The verdict (end of e4defrag's `main` loop) and our figures.
    fn finish(&mut self, out: &mut dyn Write) -> io::Result<()> {
        if !self.opts.root {
            return writeln!(out, " Done.");
        }
        let arg = String::from_utf8_lossy(self.t.arg);
        if self.sum.scored == 0 {
            if self.opts.verbose {
                writeln!(out)?;
            }
            match self.t.kind {
                ArgKind::Device => {
                    writeln!(out, " In this device({arg}), none can be defragmented.")?
                }
                ArgKind::Directory => {
                    writeln!(out, " In this directory({arg}), none can be defragmented.")?
                }
                ArgKind::File => writeln!(out, " This file({arg}) can't be defragmented.")?,
            }
            return writeln!(out, " Done.");
        }
        let t = &self.sum.totals;
        let bs = u64::from(self.src.block_size());
        let score = t.score();
        write!(
            out,
            "\n Total/best extents\t\t\t\t{}/{}\n Average size per extent\t\t\t{} KB\n Fragmentation score\t\t\t\t{}\n",
            t.now,
            t.best,
            t.size_per_ext(bs),
            format_score(score)
        )?;
        writeln!(
            out,
            " [0-30 no problem: 31-55 a little bit fragmented: 56- needs defrag]"
        )?;
        let what = match self.t.kind {
            ArgKind::Device => "device",
            ArgKind::Directory => "directory",
            ArgKind::File => "file",
        };
        let verdict = if score > BOUND_SCORE {
            "needs defragmentation."
        } else {
            "does not need defragmentation."
        };
        writeln!(out, " This {what} ({arg}) {verdict}")?;
        self.figures(out)?;
        writeln!(out, " Done.")
    }

    fn figures(&self, out: &mut dyn Write) -> io::Result<()> {
        let free = self.src.free_space();
        let space = match &free {
            Ok(f) => {
                let kb = u64::from(f.block_size / 1024);
                format!(
                    "largest free extent {} KB of {} KB free",
                    f.max * kb,
                    f.free_blocks * kb
                )
            }
            Err(e) => format!("free space unknown ({e})"),
        };
        writeln!(
            out,
            " Extents below 1 MiB: {} in {} files; {space}",
            self.sum.small_extents, self.sum.small_files
        )?;
        if let (true, Ok(f)) = (self.opts.verbose, &free) {
            writeln!(out)?;
            write!(out, "{}", f.histogram())?;
        }
        Ok(())
    }
}

/// A file's row: the name padded to `width` or on a line of its own when
/// longer, then now/best and size per extent (or dashes when not root).
fn file_line(name: &[u8], width: usize, s: &FileScore, root: bool) -> Vec<u8> {
    let mut line = Vec::new();
    let long = name.len() > width;
    if long {
        line.extend_from_slice(name);
        line.push(b'\n');
    } else {
        line.extend_from_slice(&pad(name, width));
    }
    let now_w = if long { 50 } else { 10 };
    let tail = if root {
        format!("{:>now_w$}/{:<10}{:>6} KB\n", s.now, s.best, s.size_per_ext)
    } else {
        format!("{:>now_w$}/{:<10}{:>7}\n", s.now, "-", "-")
    };
    line.extend(tail.bytes());
    line
}

/// The C library's words for an errno, as perror prints them.
pub(crate) fn strerror(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(n) => {
            let s = io::Error::from_raw_os_error(n).to_string();
            // std appends " (os error N)".
            match s.rfind(" (os error") {
                Some(i) => s[..i].to_string(),
                None => s,
            }
        }
        None => ext4r::error::chain(e),
    }
}
