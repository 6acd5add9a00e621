//! Adding and removing the internal journal, as tune2fs's `add_journal`
//! (`-j`, `-J`, `-O has_journal`) and `remove_journal_inode`
//! (`-O ^has_journal`) do. The journal is made by the library's service
//! [`crate::journal_create`] (which fsck uses too), over the encoding mkfs
//! uses (`crate::mkfs::journal`), following `ext2fs_add_journal_inode3`
//! just as the e2fsprogs tools share it.

use super::{Refused, Run, Step};
use crate::device::BlockDevice;
use crate::error::{Error, Location, Result};
use crate::journal_create::{create, NewJournal};
use crate::meta::Meta;
use crate::mkfs::journal::{self, FC_RATIO, JOURNAL_INO};
use ext4r_format::features::Compat;
use ext4r_format::inode::{Inode, InodeFlags};
use ext4r_format::num;
use std::fmt::Write as _;
use std::sync::Arc;

/// `-j` / `-J`: the journal wanted, as tune2fs's globals hold it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct JournalRequest {
    /// tune2fs's `journal_size`: 0 no journal, -1 the default size, else
    /// MiB.
    pub size: i64,
    /// `fast_commit_size=`, KiB.
    pub fc_size: u64,
    /// `location=` as given (a number of blocks, or with a K/M/G/T/s unit).
    pub location: Option<String>,
    /// `device=`: an external journal (refused).
    pub device: Option<String>,
    /// `v1_superblock`.
    pub v1: bool,
}

/// tune2fs's message for a bad `-J` list.
pub const JOURNAL_USAGE: &str = "\nBad journal options specified.\n\n\
Journal options are separated by commas, and may take an argument which\n\
\tis set off by an equals ('=') sign.\n\n\
Valid journal options are:\n\
\tsize=<journal size in megabytes>\n\
\tdevice=<journal device>\n\
\tlocation=<journal location>\n\n\
The journal size must be between 1024 and 10240000 filesystem blocks.\n\n";

/// `parse_journal_opts`: applies a `-J` list to `req`; `Err` with
/// tune2fs's message when an option is bad.
///
/// # Errors
/// [`JOURNAL_USAGE`], tune2fs's message, for an unknown option or a
/// size that is not a number.
pub fn parse_journal_opts(opts: &str, req: &mut JournalRequest) -> std::result::Result<(), String> {
    let mut bad = 0;
    for token in opts.split(',') {
        if token.is_empty() {
            // strtok-like: an empty token ends the list in tune2fs.
            break;
        }
        let (key, arg) = match token.split_once('=') {
            Some((k, a)) => (k, Some(a)),
            None => (token, None),
        };
        match (key, arg) {
            ("device", Some(a)) => req.device = Some(a.to_string()),
            ("size", Some(a)) => match super::parse_c_ulong(a) {
                Some(v) => req.size = v as i64,
                None => bad += 1,
            },
            ("fast_commit_size", Some(a)) => match super::parse_c_ulong(a) {
                Some(v) => req.fc_size = v,
                None => bad += 1,
            },
            ("location", Some(a)) => req.location = Some(a.to_string()),
            ("v1_superblock", _) => req.v1 = true,
            _ => bad += 1,
        }
    }
    if bad > 0 {
        return Err(JOURNAL_USAGE.to_string());
    }
    Ok(())
}

/// `parse_num_blocks2`: a number with an optional unit, in blocks of
/// `1024 << log_block_size` bytes; 0 when it does not parse.
fn parse_num_blocks(arg: &str, log_block_size: u32) -> u64 {
    let split = arg
        .find(|c: char| !(c.is_ascii_hexdigit() || c == 'x' || c == 'X'))
        .unwrap_or(arg.len());
    // Hex digits include letters; take the longest prefix strtoull reads.
    let Some((num, unit)) = (0..=split)
        .rev()
        .find_map(|i| super::parse_c_ulong(&arg[..i]).map(|v| (v, &arg[i..])))
    else {
        return 0;
    };
    let k = |n: u64| n >> log_block_size;
    match unit {
        "" => num,
        "T" | "t" => k(num << 30),
        "G" | "g" => k(num << 20),
        "M" | "m" => k(num << 10),
        "K" | "k" => k(num),
        "s" => num >> (1 + log_block_size),
        _ => 0,
    }
}

/// `print_check_message`.
fn check_message(out: &mut String, max_mnt: i16, interval: u32) {
    let mnt = i32::from(max_mnt).max(0);
    if mnt == 0 && interval == 0 {
        return;
    }
    let _ = writeln!(
        out,
        "This filesystem will be automatically checked every {mnt} mounts or\n\
         {} days, whichever comes first.  Use tune.ext4r -c or -i to override.",
        super::fmt_g(f64::from(interval) / 86400.0)
    );
}

impl Run<'_, '_> {
    /// The metadata being changed, read on first use.
    pub(super) fn meta(&mut self, dev: &Arc<dyn BlockDevice>) -> Result<&mut Meta> {
        let m = match self.meta.take() {
            Some(m) => m,
            None => Box::new(Meta::load(dev, &self.sb)?),
        };
        Ok(self.meta.insert(m))
    }

    /// tune2fs's `add_journal`.
    pub(super) fn add_journal(&mut self, dev: &Arc<dyn BlockDevice>) -> Result<Step> {
        if self.sb.has_compat(Compat::HAS_JOURNAL) {
            return Ok(self.refuse("The filesystem already has a journal.\n"));
        }
        if self.journal.device.is_some() {
            return Ok(self.refuse(
                "tune.ext4r: external journals (-J device=) are not supported; \
                 nothing was changed.\n",
            ));
        }
        if self.journal.size == 0 {
            return Ok(Ok(()));
        }
        self.out.push_str("Creating journal inode: ");
        let Some((jblocks, fc)) = self.figure_journal_size()? else {
            return Ok(Err(Refused));
        };
        let goal = match &self.journal.location {
            Some(l) => Some(parse_num_blocks(l, self.sb.s_log_block_size.get())),
            None => None,
        };
        if jblocks + fc < 1024 {
            let _ = writeln!(
                self.err,
                "\n{}: Journal must be at least 1024 blocks \n\twhile trying to create \
                 journal file",
                self.env.program
            );
            return Ok(Err(Refused));
        }
        let v1 = self.journal.v1;
        let now = self.env.now;
        let spec = NewJournal {
            blocks: jblocks,
            fc_blocks: fc,
            goal,
            v1,
            now,
        };
        let mut sb = self.sb.clone();
        let m = self.meta(dev)?;
        if let Err(e) = create(m, &mut sb, &spec)? {
            let _ = writeln!(
                self.err,
                "\n{}: {e} \n\twhile trying to create journal file",
                self.env.program
            );
            return Ok(Err(Refused));
        }
        self.sb = sb;
        self.dirty = true;
        self.out.push_str("done\n");
        check_message(
            &mut self.out,
            self.sb.s_max_mnt_count.get(),
            self.sb.s_checkinterval.get(),
        );
        Ok(Ok(()))
    }

    /// `figure_journal_size`: journal and fast-commit blocks, or `None`
    /// after tune2fs's message when the request is out of bounds.
    fn figure_journal_size(&mut self) -> Result<Option<(u64, u64)>> {
        let blocks = self.sb.blocks_count();
        let fast_commit = self.sb.has_compat(Compat::FAST_COMMIT);
        let Some(mut jblocks) = journal::default_journal_blocks(blocks) else {
            self.err.push_str("\nFilesystem too small for a journal\n");
            return Ok(Some((0, 0)));
        };
        let mut fc = if fast_commit { jblocks / FC_RATIO } else { 0 };
        let req = &self.journal;
        if req.size > 0 || (fast_commit && req.fc_size > 0) {
            let kib = u64::from(self.sb.block_size().unwrap_or(1024)) / 1024;
            if req.size > 0 {
                jblocks = (req.size as u64 * 1024) / kib;
            }
            if fast_commit && req.fc_size > 0 {
                // fcsize_to_blks: this size is in KiB.
                fc = req.fc_size * 1024 / (kib * 1024);
            } else if !fast_commit {
                fc = 0;
            }
            // tune2fs holds the total in an int, which a huge request can
            // wrap into range; the full-width sum is checked here instead.
            let total = jblocks.saturating_add(fc);
            if !(1024..=10_240_000).contains(&total) {
                let _ = write!(
                    self.err,
                    "\nThe total requested journal size is {total} blocks; it must be\n\
                     between 1024 and 10240000 blocks.  Aborting.\n"
                );
                return Ok(None);
            }
            if total > self.sb.free_blocks_count() / 2 {
                self.err
                    .push_str("\nTotal journal size too big for filesystem.\n");
                return Ok(None);
            }
        }
        Ok(Some((jblocks, fc)))
    }

    /// tune2fs's `remove_journal_inode` (and, with `-f`, forgetting an
    /// external journal device).
    pub(super) fn remove_journal(
        &mut self,
        dev: &Arc<dyn BlockDevice>,
        force: u32,
    ) -> Result<Step> {
        let ino = self.sb.s_journal_inum.get();
        if ino != 0 {
            let m = self.meta(dev)?;
            let mut rec = m.read_inode(ino)?;
            let inode = Inode::parse(&rec).map_err(|e| Error::corrupt(Location::inode(ino), e))?;
            if ino == JOURNAL_INO {
                let blocks = match m.inode_blocks(ino, &rec) {
                    Ok(b) => b,
                    Err(e) => {
                        let _ = writeln!(
                            self.err,
                            "{}: {} while clearing journal inode",
                            self.env.program,
                            crate::error::chain(&e)
                        );
                        return Ok(Err(Refused));
                    }
                };
                // tune2fs's release_blocks_proc credits a cluster per
                // block: with bigalloc its free counts come out too high
                // (e2fsck then corrects them). Each cluster is freed once
                // here, so the counts stay right.
                m.free_blocks_of(&blocks)?;
                let size = inode.size();
                let bs = m.geo.block_size as u64;
                let ratio = m.geo.cluster_ratio();
                m.clear_inode_base(ino)?;
                let over = self.sb.s_overhead_clusters.get();
                self.sb
                    .s_overhead_clusters
                    .set(over.wrapping_sub(num::sat_u32((size / bs).div_ceil(ratio))));
            } else {
                // A journal in a regular file: it becomes an ordinary file.
                let mut inode = inode;
                inode.set_flags(inode.flags() - InodeFlags::IMMUTABLE);
                inode
                    .write(&mut rec)
                    .map_err(|e| Error::corrupt(Location::inode(ino), e))?;
                m.write_inode(ino, rec)?;
            }
            self.sb.s_journal_inum.set(0);
            for w in self.sb.s_jnl_blocks.iter_mut() {
                w.set(0);
            }
            self.dirty = true;
        }
        if self.sb.s_journal_dev.get() != 0 {
            if force == 0 {
                return Ok(self.refuse(
                    "tune.ext4r: the journal is on an external device, which tune.ext4r \
                     does not open.\nUse -f option to remove missing journal device.\n",
                ));
            }
            self.sb.s_journal_dev.set(0);
            self.sb.s_journal_uuid = [0; 16];
            self.out.push_str("Journal removed\n");
            self.dirty = true;
        }
        Ok(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn journal_options_parse() {
        let mut r = JournalRequest::default();
        parse_journal_opts("size=64,location=1M", &mut r).unwrap();
        assert_eq!(r.size, 64);
        assert_eq!(r.location.as_deref(), Some("1M"));
        assert!(parse_journal_opts("frob", &mut r).is_err());
        assert!(parse_journal_opts("size", &mut r).is_err());
    }

    #[test]
    fn locations_in_blocks() {
        assert_eq!(parse_num_blocks("1000", 2), 1000);
        assert_eq!(parse_num_blocks("4M", 2), 1024);
        assert_eq!(parse_num_blocks("4M", 0), 4096);
        assert_eq!(parse_num_blocks("8s", 0), 4);
        assert_eq!(parse_num_blocks("4q", 0), 0);
    }
}
