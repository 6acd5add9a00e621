//! `mkfs.ext4r -d SOURCE` at the smallest size: the size word `min`
//! (also what a missing size means when the image file does not exist
//! yet), optionally with slack (`min+10%`, `min+64M`).
//!
//! The tree is measured first (inodes, and an upper bound on the blocks
//! its files, directories and symlinks take), a filesystem a little
//! larger than that is made and filled, then shrunk through the library's
//! resize to exactly the size `resize.ext4r -M` reaches, grown by the
//! slack if any, and the image file cut there. Measuring only sizes the
//! first filesystem: the final size is the resize's minimum, found by dry
//! runs of the shrink, so an estimate off in either direction costs time
//! (a filesystem that ran out of room is made again twice as large), not
//! bytes. Every step is deterministic, so under `SOURCE_DATE_EPOCH` the
//! same tree gives the same bytes.

use super::super::populate::Source;
use anyhow::{bail, Context, Result};
use ext4r::mkfs::{self, MkfsOptions, Plan};
use ext4r::resize::{NewSize, Refusal, ResizeError, ResizeOptions};
use std::collections::HashSet;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Free room asked on top of the minimum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Slack {
    /// `min`: none beyond what the last group's rounding leaves.
    None,
    /// `min+N%`: this percentage of the minimum.
    Percent(u32),
    /// `min+SIZE`: this many bytes.
    Bytes(u64),
}

/// `min`, `min+N%` or `min+SIZE` (SIZE as mkfs's sizes, a bare number in
/// `unit`s); `None` for anything else.
pub(super) fn parse_min(s: &str, unit: u64) -> Result<Option<Slack>> {
    let s = s.trim();
    let Some(rest) = s.strip_prefix("min") else {
        return Ok(None);
    };
    if rest.is_empty() {
        return Ok(Some(Slack::None));
    }
    let Some(extra) = rest.strip_prefix('+') else {
        bail!("invalid size '{s}': `min`, `min+N%` or `min+SIZE`");
    };
    if let Some(p) = extra.strip_suffix('%') {
        let p: u32 = p
            .parse()
            .ok()
            .filter(|p| *p <= 1000)
            .with_context(|| format!("invalid slack '{extra}' in '{s}' (0% to 1000%)"))?;
        return Ok(Some(Slack::Percent(p)));
    }
    let b = mkfs::parse_size(extra, unit).with_context(|| format!("invalid size '{s}'"))?;
    Ok(Some(Slack::Bytes(b)))
}

/// What a tree needs, counted from the source before anything is made.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct TreeSize {
    /// Inodes: every name but the extra names of hard links, the root
    /// included.
    pub inodes: u64,
    /// Bytes of blocks, each file, directory and long symlink rounded up
    /// to 4 KiB blocks (an upper bound for smaller blocks too).
    pub bytes: u64,
}

const BLOCK: u64 = 4096;

fn blocks_of(bytes: u64) -> u64 {
    bytes.div_ceil(BLOCK) * BLOCK
}

/// A directory of `entries` names totalling `name_bytes`: its records,
/// with room for the half-full leaves an htree split leaves.
fn dir_bytes(entries: u64, name_bytes: u64) -> u64 {
    let records = entries * 12 + name_bytes + 24;
    blocks_of(records + records / 2) + BLOCK
}

/// Measures `src`. Standard input cannot be read twice: refused.
pub(super) fn measure(src: &Source) -> Result<TreeSize> {
    match src {
        Source::Dir(d) => {
            let mut t = TreeSize {
                inodes: 1,
                ..TreeSize::default()
            };
            let mut seen = HashSet::new();
            walk(d, &mut t, &mut seen).with_context(|| format!("{}", d.display()))?;
            Ok(t)
        }
        Source::Tar(p) => measure_tar(p).with_context(|| format!("{}", p.display())),
        Source::Stdin => bail!(
            "the size `min` needs a source that can be read twice (a directory or a tar \
             file), not standard input: give a size"
        ),
    }
}

fn walk(dir: &Path, t: &mut TreeSize, seen: &mut HashSet<(u64, u64)>) -> Result<()> {
    let (mut entries, mut names) = (0u64, 0u64);
    for e in std::fs::read_dir(dir).with_context(|| format!("{}", dir.display()))? {
        let e = e?;
        let path = e.path();
        let md = std::fs::symlink_metadata(&path).with_context(|| format!("{}", path.display()))?;
        entries += 1;
        names += e.file_name().len() as u64;
        if md.is_dir() {
            t.inodes += 1;
            walk(&path, t, seen)?;
            continue;
        }
        if md.nlink() > 1 && !seen.insert((md.dev(), md.ino())) {
            continue;
        }
        t.inodes += 1;
        if md.is_file() {
            // Holes stay holes: what the source allocates, at most its size.
            t.bytes += blocks_of(md.len().min(md.blocks() * 512));
        } else if md.file_type().is_symlink() && md.len() >= 60 {
            t.bytes += BLOCK;
        }
    }
    t.bytes += dir_bytes(entries, names);
    Ok(())
}

/// Parses an octal (or base-256) tar number field.
fn tar_number(f: &[u8]) -> u64 {
    if f.first().is_some_and(|b| b & 0x80 != 0) {
        return f[1..]
            .iter()
            .fold(0u64, |n, b| n.saturating_mul(256) | u64::from(*b));
    }
    f.iter()
        .skip_while(|b| **b == b' ')
        .take_while(|b| (b'0'..=b'7').contains(*b))
        .fold(0u64, |n, b| n.saturating_mul(8) + u64::from(b - b'0'))
}

/// Counts a tar archive's members from their headers, skipping the data.
/// Every data byte is counted, so sparse members are over-counted; names
/// of directories are counted against one directory each (an upper bound
/// for their entries).
fn measure_tar(p: &Path) -> Result<TreeSize> {
    let mut f = std::io::BufReader::new(std::fs::File::open(p)?);
    let mut t = TreeSize {
        inodes: 1,
        ..TreeSize::default()
    };
    let (mut names, mut entries) = (0u64, 0u64);
    let mut h = [0u8; 512];
    loop {
        if f.read_exact(&mut h).is_err() || h.iter().all(|b| *b == 0) {
            break;
        }
        let size = tar_number(&h[124..136]);
        let kind = h[156];
        // Long names, pax headers and volume labels are not members.
        if !matches!(kind, b'L' | b'K' | b'x' | b'g' | b'V') {
            entries += 1;
            names += 100;
            // Hard links are names of inodes already counted.
            if kind != b'1' {
                t.inodes += 1;
            }
            match kind {
                b'0' | 0 | b'7' | b'S' => t.bytes += blocks_of(size),
                b'2' => t.bytes += BLOCK,
                b'5' => t.bytes += BLOCK,
                _ => {}
            }
        }
        f.seek(SeekFrom::Current(size.div_ceil(512) as i64 * 512))?;
    }
    t.bytes += dir_bytes(entries, names);
    Ok(t)
}

/// The first filesystem for `tree`: `opts` sized to hold it with room to
/// spare (the journal the size brings included) and, unless `-N` or `-i`
/// chose, inodes enough that the groups left after the shrink still hold
/// every file. Plans quietly: the caller plans again with its notices.
pub(super) fn size_options(
    opts: &mut MkfsOptions,
    tree: &TreeSize,
    inodes_chosen: bool,
) -> Result<Plan> {
    // Inode tables, the 5% reserve, group metadata and a floor of 8 MiB.
    let need_inodes = (tree.inodes + 16) * 13 / 10 + 64;
    let base =
        (tree.bytes + tree.bytes / 5 + need_inodes * 256 + (8 << 20)).next_multiple_of(1 << 20);
    opts.size_bytes = base;
    let mut plan = mkfs::plan(opts)?;
    for _ in 0..3 {
        let s = plan.summary();
        let journal = s.journal_blocks * u64::from(s.block_size);
        let want = (base + journal).next_multiple_of(1 << 20);
        let inodes_short = !inodes_chosen && u64::from(s.inodes_count) < need_inodes;
        if want == opts.size_bytes && !inodes_short {
            break;
        }
        opts.size_bytes = want;
        if inodes_short {
            opts.num_inodes = Some(need_inodes);
        }
        plan = mkfs::plan(opts)?;
    }
    Ok(plan)
}

/// Whether `e` says the filesystem ran out of blocks or inodes.
pub(super) fn out_of_room(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        matches!(
            c.downcast_ref::<ext4r::Error>(),
            Some(ext4r::Error::NoSpace | ext4r::Error::NoFreeInodes)
        )
    })
}

/// Shrinks the filled filesystem in the image file `path` to its minimum,
/// grows it by `slack`, and cuts the file where the filesystem ends.
/// Returns the final size in blocks and the block size.
pub(super) fn shrink(path: &Path, slack: Slack, now: i64) -> Result<(u64, u32)> {
    let mut o = ResizeOptions::default();
    // Just made and filled by us, closed cleanly.
    o.force = true;
    o.now = Some(now);
    let (mut blocks, bs) = match ext4r::resize::resize_image(path, NewSize::Minimum, &o) {
        Ok(r) => (r.new_blocks, r.block_size),
        Err(ResizeError::Refused(Refusal::NothingToDo { blocks })) => {
            let dev = ext4r::device::FileDevice::open(path, Default::default())?;
            let sb = ext4r::resize::superblock(&dev)?;
            (blocks, sb.block_size().context("no block size")?)
        }
        Err(e) => return Err(e).context("while shrinking to the minimum"),
    };
    let extra = match slack {
        Slack::None => 0,
        Slack::Percent(p) => (blocks * u64::from(p)).div_ceil(100),
        Slack::Bytes(b) => b.div_ceil(u64::from(bs)),
    };
    if extra > 0 {
        match ext4r::resize::resize_image(path, NewSize::Blocks(blocks + extra), &o) {
            Ok(r) => blocks = r.new_blocks,
            Err(ResizeError::Refused(Refusal::NothingToDo { .. })) => {}
            Err(e) => return Err(e).context("while adding the slack"),
        }
    }
    Ok((blocks, bs))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn size_words() {
        assert_eq!(parse_min("min", 1024).unwrap(), Some(Slack::None));
        assert_eq!(
            parse_min("min+10%", 1024).unwrap(),
            Some(Slack::Percent(10))
        );
        assert_eq!(
            parse_min("min+64M", 1024).unwrap(),
            Some(Slack::Bytes(64 << 20))
        );
        assert_eq!(
            parse_min("min+3", 4096).unwrap(),
            Some(Slack::Bytes(3 * 4096))
        );
        assert_eq!(parse_min("64M", 1024).unwrap(), None);
        assert!(parse_min("minimum", 1024).is_err());
        assert!(parse_min("min+x%", 1024).is_err());
    }

    #[test]
    fn tar_numbers() {
        assert_eq!(tar_number(b"00000001750\0"), 1000);
        assert_eq!(tar_number(b"     17 \0"), 15);
        let mut big = [0u8; 12];
        big[0] = 0x80;
        big[11] = 2;
        big[10] = 1;
        assert_eq!(tar_number(&big), 258);
    }
}
