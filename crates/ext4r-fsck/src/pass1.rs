//! Pass 1: every inode in use — mode, flags, block mapping, size,
//! `i_blocks`, xattrs — reading inode tables in one large read per group
//! and skipping what the group descriptors say is unused.

use crate::codes::ProblemCode;
use crate::problem::Subject;
use ext4r::fs::FileKind;
use ext4r_format::features::{Compat, Incompat, RoCompat};
use ext4r_format::inode::{
    ino as special, inode_checksum_matches, is_zeroed_inode, verify_inode_checksum, Inode,
    InodeCsumInPlace, InodeFlags,
};
use ext4r_format::{num, GroupNr, InodeNr};

use crate::ctx::Progress;
use crate::ctx::{Ctx, DirBlock, DirInfo};
use crate::fix::Fix;
use crate::pass1_map::{self, MapResult};

/// Inode table bytes read at once. With one chunk queued, at most three
/// buffers are alive (one checked, one queued, one being read): 768 KiB,
/// under what pass 2 holds at its peak. Smaller chunks cost time, not
/// memory worth having: 64 KiB ones made five times the thread handoffs
/// (20,000 context switches for 2M inodes, 8% more CPU time).
const CHUNK: usize = 256 << 10;

pub(crate) fn run(c: &mut Ctx, progress: Progress<'_>) {
    let ipg = c.geo().inodes_per_group;
    let isize = c.geo().inode_size as usize;
    let bs = u64::from(c.geo().block_size);
    let wide = c.wide();
    let groups = c.geo().group_count;
    let specials = special_inodes(c);
    let list = crate::badblocks::list(c);
    c.set_bad_blocks(list);
    if crate::badblocks::lists_itself(c) {
        c.set_bad_blocks(Vec::new());
    }
    let in_bad = crate::badblocks::inodes_in_bad_blocks(c);
    let first_ino = c.sb().first_ino();
    for i in in_bad.into_iter().filter(|&i| i >= first_ino) {
        c.note_extra_used(i);
    }
    // The reads to do, from the descriptors: used parts of inode tables.
    let mut jobs: Vec<(u32, u32, u32, u64)> = Vec::new(); // group, first, count, offset
    let per_chunk = num::sat_u32((CHUNK / isize).max(1));
    for g in 0..groups {
        if c.groups().table_unusable(g) {
            continue;
        }
        let Ok(d) = c.fs().group_desc(GroupNr(g)).copied() else {
            break;
        };
        let n = c.inodes_to_read(g);
        let table = d.inode_table(wide);
        let mut first = 0u32;
        while first < n {
            let count = per_chunk.min(n - first);
            jobs.push((
                g,
                first,
                count,
                table * bs + u64::from(first) * isize as u64,
            ));
            first += count;
        }
    }
    let scan = Scan {
        dev: c.fs().device_shared(),
        isize,
        ipg,
        bs: num::index(bs),
        first_data_block: c.geo().first_data_block,
        blocks_count: c.geo().blocks_count,
        seed: c.csum().then(|| c.sb().csum_seed()),
        in_place: c.csum().then(|| InodeCsumInPlace::new(isize)).flatten(),
        wide,
    };
    // What the look at inode 7 reads, told first: it comes to the front
    // of the first chunk's checks.
    crate::resize_inode::announce(c);
    // The used parts of the inode tables, told to the device a window
    // ahead of the readers (see `crate::ahead`).
    let dev = c.fs().device_shared();
    let jobs_ref = &jobs;
    let span = move |j: usize| (jobs_ref[j].3, u64::from(jobs_ref[j].2) * isize as u64);
    // On a cold cache a scout reads at the disk's front and announces
    // what the records name (see `crate::ahead::Scout`); asked before the
    // first window is announced, which puts its reads in flight.
    let scout = crate::ahead::Scout::wanted(&*dev, jobs.len(), span);
    let ahead = crate::ahead::Ahead::new(&*dev, jobs.len(), span);
    let reads = Reads {
        ahead: &ahead,
        scout: scout.as_ref(),
    };
    std::thread::scope(|s| {
        let _stop = scout.as_ref().map(crate::ahead::StopOnDrop);
        if let Some(sc) = &scout {
            let (ahead, scan) = (&ahead, &scan);
            let mut buf = vec![0u8; crate::ahead::Scout::PIECE];
            s.spawn(move || sc.run(ahead, &mut buf, |recs| scan.announce(recs, &[])));
        }
        if c.threads() > 1 && jobs.len() > 1 {
            parallel(c, &jobs, &specials, &scan, &reads, progress);
        } else {
            let mut buf = Vec::new();
            for (n, &job) in jobs.iter().enumerate() {
                if c.poll_cancel() || c.stopping() {
                    break;
                }
                let told = reads.reading(n);
                let pre = scan.read(job, &mut buf, !told);
                if take_chunk(c, job, groups, progress, pre.is_some()) {
                    let pre = pre.unwrap_or_default();
                    let base = job.0 * ipg + job.1 + 1;
                    for (k, rec) in buf.chunks(isize).enumerate() {
                        // k < the chunk's inode count, a u32.
                        check_inode(c, base + num::sat_u32(k), rec, &specials, pre[k]);
                    }
                }
            }
        }
    });
    crate::pass1_xattr::finish_xattr_blocks(c);
    crate::resize_inode::finish(c);
    // Kept with repeats: pass 4 counts the references to each EA inode.
    c.sort_ea_refs();
    if c.any_large().1 && !c.sb().has_incompat(Incompat::LARGEDIR) {
        c.report(Subject::Filesystem).error_fix(
            1,
            ProblemCode::PR_2_FEATURE_LARGE_DIRS,
            "Filesystem has large directories, but lacks LARGE_DIR flag in superblock.".into(),
            Fix::SetLargeDir,
        );
    }
    if c.any_large().0 && !c.sb().has_ro_compat(RoCompat::LARGE_FILE) {
        c.report(Subject::Filesystem).error_fix(
            2,
            ProblemCode::PR_2_FEATURE_LARGE_FILES,
            "Filesystem contains large files, but lacks LARGE_FILE flag in superblock.".into(),
            Fix::SetLargeFile,
        );
        if c.sb().s_rev_level.get() == 0 {
            c.report(Subject::Filesystem).error_fix(
                2,
                ProblemCode::PR_1_FS_REV_LEVEL,
                "Filesystem has feature flag(s) set, but is a revision 0 filesystem.".into(),
                Fix::Superblock(crate::fix::super_edit::SuperEdit::DynamicRev),
            );
        }
    }
}

/// One read of pass 1: (group, first inode index in it, inodes, byte
/// offset of the first).
type Job = (u32, u32, u32, u64);

/// Where pass 1's readers say which read they make next: the window of
/// announced reads, and the scout of a cold cache.
struct Reads<'a, F: Fn(usize) -> (u64, u64)> {
    ahead: &'a crate::ahead::Ahead<'a, F>,
    scout: Option<&'a crate::ahead::Scout>,
}

impl<F: Fn(usize) -> (u64, u64)> Reads<'_, F> {
    /// Read `n` is next: the window moves on, and with a scout the reader
    /// waits to be far enough behind it. Whether the scout has announced
    /// what read `n`'s records name.
    fn reading(&self, n: usize) -> bool {
        self.ahead.reading(n);
        self.scout
            .is_some_and(|s| s.reading(n, self.ahead, CHUNK as u64))
    }
}

/// What reading the inode tables needs, shared by the threads that read.
struct Scan {
    dev: std::sync::Arc<dyn ext4r::device::BlockDevice>,
    isize: usize,
    ipg: u32,
    bs: usize,
    first_data_block: u64,
    blocks_count: u64,
    seed: Option<u32>,
    /// What the checksum fields of records of this size add to a CRC run
    /// over them (with checksums).
    in_place: Option<InodeCsumInPlace>,
    /// 64-bit block numbers (for the xattr block's high half).
    wide: bool,
}

impl Scan {
    /// Reads `job`'s records into `buf` and works out what needs no
    /// shared state per record ([`prescan`], the garbage test); `None`
    /// when the read fails. `announce`: tell the device what the records
    /// name (unless a scout did).
    fn read(&self, job: Job, buf: &mut Vec<u8>, announce: bool) -> Option<Vec<u8>> {
        let (g, first, count, off) = job;
        buf.resize(count as usize * self.isize, 0);
        self.dev.read_at(buf, off).ok()?;
        let seed = self.seed.zip(self.in_place.as_ref());
        let mut pre = prescan(buf, self.isize, g * self.ipg + first + 1, seed);
        if announce {
            self.announce(buf, &pre);
        }
        // With checksums only a record whose checksum fails is cleared as
        // garbage (see `check_inode`): a chunk of good ones (nearly every
        // chunk) needs no judging of its blocks.
        if self.seed.is_some() && pre.iter().all(|&p| p & PRE_BAD_CSUM == 0) {
            return Some(pre);
        }
        let junk = crate::garbage::garbage_blocks(
            buf,
            self.isize,
            self.bs,
            |k| pre[k] & PRE_BAD_CSUM != 0,
            self.first_data_block,
            self.blocks_count,
        );
        for (p, j) in pre.iter_mut().zip(junk) {
            if j {
                *p |= PRE_GARBAGE;
            }
        }
        Some(pre)
    }
}

impl Scan {
    /// Tells the device the blocks the checks of a chunk's inodes will
    /// read (see [`crate::ahead::inode_blocks`]), all at once, so that the
    /// disk fetches them together while the checks run rather than one at
    /// a time as each inode's check comes to it. `pre`: the prescan's
    /// bits (all-zero records are skipped), or empty (a scout's look).
    fn announce(&self, buf: &[u8], pre: &[u8]) {
        let mut blocks = Vec::new();
        for (k, rec) in buf.chunks(self.isize).enumerate() {
            if pre.get(k).is_some_and(|p| p & PRE_ZERO != 0) {
                continue;
            }
            if let Some(inode) = inode_of(rec) {
                crate::ahead::inode_blocks(
                    &inode,
                    self.wide,
                    self.first_data_block,
                    self.blocks_count,
                    &mut blocks,
                );
            }
        }
        crate::ahead::blocks(&*self.dev, &mut blocks, self.bs as u64);
    }
}

/// The start of a chunk's checks, in order: progress, and the failed read
/// (e2fsck -n's "Ignore error? no", fatal; a repair ignores it and goes
/// on, as e2fsck -y does). Whether its records are to be checked.
fn take_chunk(c: &mut Ctx, job: Job, groups: u32, progress: Progress<'_>, read: bool) -> bool {
    let g = job.0;
    progress(1, u64::from(g), u64::from(groups));
    if read {
        return true;
    }
    c.report(Subject::Group(g)).error(
        1,
        ProblemCode::PR_1_ISCAN_ERROR,
        format!("Error while reading inode table of group {g}."),
    );
    if !c.repairing() {
        // An inode scan that cannot go on is fatal (PR_1_ISCAN_ERROR is
        // PR_FATAL): exit 8.
        c.fail(format!(
            "Error while scanning inodes: cannot read the inode table of group {g}"
        ));
    }
    false
}

/// What a worker hands over for a batch of reads, in order: what it
/// found, cut where the merging thread has to act in between.
enum Piece {
    /// Findings to add.
    Found(Box<crate::ctx::Found>),
    /// An inode to check on the merging thread ([`in_order`]): number,
    /// prescan bits, record.
    Left(u32, u8, Vec<u8>),
    /// The read of `jobs[n]` failed.
    Failed(usize),
    /// The end of a read that had inodes left to the merging thread.
    End,
}

/// Whether checking inode `ino` reads or changes what the checks of other
/// inodes share, so that it must be checked in inode order on the merging
/// thread: the reserved and special inodes, the journal's, an inode with
/// an xattr block (blocks are shared and counted), an encrypted one
/// (policies are numbered as met), any inode while a bad block list is in
/// force (its checks look the list up and may move metadata).
fn in_order(c: &Ctx, ino: u32, rec: &[u8], pre: u8, specials: &[u32]) -> bool {
    if ino < c.sb().first_ino() || ino == c.journal_ino() || specials.contains(&ino) {
        return true;
    }
    // An all-zero record is done with before the rest is looked at.
    if pre & PRE_ZERO != 0 {
        return false;
    }
    if !c.bad_blocks().is_empty() {
        return true;
    }
    let Some(inode) = inode_of(rec) else {
        return true;
    };
    // An xattr block by either half of its number, wide or not.
    inode.file_acl(true).0 != 0 || inode.flags().contains(InodeFlags::ENCRYPT)
}

/// The inode of a record: read in place where the record holds the whole
/// structure (a copy per inode was a tenth of pass 1's time), else a
/// padded copy (128-byte records).
fn inode_of(rec: &[u8]) -> Option<std::borrow::Cow<'_, Inode>> {
    match Inode::in_record(rec) {
        Some(i) => Some(std::borrow::Cow::Borrowed(i)),
        None => Inode::parse(rec).ok().map(std::borrow::Cow::Owned),
    }
}

/// Pass 1 on `c.threads()` worker threads, each reading and checking chunks
/// of the inode tables on its own context ([`Ctx::worker`]); this thread
/// adds their findings chunk by chunk in inode order and checks the
/// inodes [`in_order`] names itself, in their place. The result is the
/// one a single thread gets: every finding in the same order.
fn parallel<F: Fn(usize) -> (u64, u64) + Sync>(
    c: &mut Ctx,
    jobs: &[Job],
    specials: &[u32],
    scan: &Scan,
    reads: &Reads<'_, F>,
    progress: Progress<'_>,
) {
    let ipg = scan.ipg;
    let groups = c.geo().group_count;
    // Reads of a few inodes each (a large volume's groups hold a handful)
    // go to the workers in batches of about a chunk's inodes: one handoff
    // per read cost more than the checks on a 16 TiB volume of big files.
    let per_batch = (CHUNK / scan.isize).max(1) as u64;
    let mut batches: Vec<(usize, usize)> = Vec::new();
    let mut start = 0;
    let mut inodes = 0u64;
    for (i, job) in jobs.iter().enumerate() {
        inodes += u64::from(job.2);
        if inodes >= per_batch || i + 1 == jobs.len() {
            batches.push((start, i + 1));
            start = i + 1;
            inodes = 0;
        }
    }
    let workers = c.threads().min(batches.len());
    let states: Vec<(Ctx, Vec<u8>)> = (0..workers).map(|_| (c.worker(), Vec::new())).collect();
    // A batch as a worker checked it: what it found, cut where this
    // thread has something to do in between (see `Piece`).
    let work = |(w, buf): &mut (Ctx, Vec<u8>), b: usize| {
        let (from, to) = batches[b];
        let mut out = Vec::new();
        for (n, &job) in jobs.iter().enumerate().take(to).skip(from) {
            let told = reads.reading(n);
            let Some(pre) = scan.read(job, buf, !told) else {
                out.push(Piece::Found(Box::new(w.take_found())));
                out.push(Piece::Failed(n));
                continue;
            };
            let base = job.0 * ipg + job.1 + 1;
            let mut left = false;
            for (k, rec) in buf.chunks(scan.isize).enumerate() {
                let ino = base + num::sat_u32(k);
                if in_order(w, ino, rec, pre[k], specials) {
                    out.push(Piece::Found(Box::new(w.take_found())));
                    out.push(Piece::Left(ino, pre[k], rec.to_vec()));
                    left = true;
                } else {
                    check_inode(w, ino, rec, specials, pre[k]);
                }
            }
            if left {
                out.push(Piece::Found(Box::new(w.take_found())));
                out.push(Piece::End);
            }
        }
        out.push(Piece::Found(Box::new(w.take_found())));
        out
    };
    // Three batches per worker may wait ahead of the one taken: with one
    // per worker and one more, this thread (a worker too, see `ordered`)
    // held the others back while it checked a batch of its own (pass 1
    // of the 2M-file image took 0.25 s; 0.22 s so).
    crate::ordered::ordered(batches.len(), states, 3 * workers, work, |b, pieces| {
        for piece in pieces {
            match piece {
                Piece::Found(f) => c.absorb(*f),
                Piece::Left(ino, pre, rec) => check_inode(c, ino, &rec, specials, pre),
                // A failed read may stop the pass (-n); so may a check
                // here, after the rest of its job (as on one thread).
                Piece::Failed(n) => {
                    take_chunk(c, jobs[n], groups, progress, false);
                    if c.stopping() {
                        return false;
                    }
                }
                Piece::End => {
                    if c.stopping() {
                        return false;
                    }
                }
            }
        }
        take_chunk(c, jobs[batches[b].1 - 1], groups, progress, true);
        !c.poll_cancel()
    });
}

/// `s_creator_os` of the GNU Hurd.
const OS_HURD: u32 = 1;

/// Record is all zeros (never used).
const PRE_ZERO: u8 = 1;
/// Record's checksum does not match.
const PRE_BAD_CSUM: u8 = 2;
/// Record is in an inode table block of garbage (see [`crate::garbage`]).
const PRE_GARBAGE: u8 = 4;

/// The per-record work that needs no shared state — the all-zero test and
/// the checksum — done by the reader thread while this one checks the
/// chunk before, on the buffer it has just read (still in its cache).
/// Spread over rayon's pool it cost more than it gave: the checks are the
/// longer of the two, and idle workers spin between chunks (5% more CPU
/// in all on the 2M-file image). `seed` is the filesystem's checksum seed
/// and the table of its records' size (see [`InodeCsumInPlace`]).
fn prescan(buf: &[u8], isize: usize, base: u32, seed: Option<(u32, &InodeCsumInPlace)>) -> Vec<u8> {
    let mut pre: Vec<u8> = buf
        .chunks(isize)
        .map(|rec| if is_zeroed_inode(rec) { PRE_ZERO } else { 0 })
        .collect();
    let Some((seed, in_place)) = seed else {
        return pre;
    };
    let rec = |k: usize| &buf[k * isize..(k + 1) * isize];
    let ino = |k: usize| InodeNr(base + num::sat_u32(k));
    let bad = |ok: bool| if ok { 0 } else { PRE_BAD_CSUM };
    // Records go through the CRC three at a time, each from its own seed
    // and where it lies (see `crc_lanes`; a copy of each with its
    // checksum zeroed was 3.5% of the CPU on the 2M-file image); what is
    // left over one by one.
    let mut batch = [0usize; 3];
    let mut waiting = 0;
    for k in 0..pre.len() {
        if pre[k] != 0 {
            continue;
        }
        batch[waiting] = k;
        waiting += 1;
        if waiting < 3 {
            continue;
        }
        waiting = 0;
        // Each CRC from the inode's number and generation, then over the
        // record.
        let head = |k: usize| InodeCsumInPlace::head(ino(k), rec(k));
        let raw = crate::crc_lanes::crc32c_x3(seed, batch.map(head), batch.map(rec));
        for (&k, raw) in batch.iter().zip(raw) {
            pre[k] = match in_place.finish(rec(k), raw) {
                Some(sum) => bad(inode_checksum_matches(rec(k), sum)),
                None => bad(verify_inode_checksum(seed, ino(k), rec(k)).is_ok()),
            };
        }
    }
    for &k in &batch[..waiting] {
        pre[k] = bad(verify_inode_checksum(seed, ino(k), rec(k)).is_ok());
    }
    pre
}

/// Inodes the superblock points at that live outside the directory tree.
fn special_inodes(c: &Ctx) -> Vec<u32> {
    let sb = c.sb();
    // A journal in an ordinary inode is an ordinary file to e2fsck's
    // passes (named by a directory, or unattached).
    let journal = Some(c.journal_ino()).filter(|&j| j < sb.first_ino());
    let mut v = vec![
        journal.unwrap_or(0),
        sb.s_usr_quota_inum.get(),
        sb.s_grp_quota_inum.get(),
        sb.s_prj_quota_inum.get(),
        sb.s_orphan_file_inum.get(),
    ];
    v.retain(|&i| i != 0);
    v
}

fn check_inode(c: &mut Ctx, ino: u32, rec: &[u8], specials: &[u32], pre: u8) {
    let from = c.problems().mark();
    check_inode_fields(c, ino, rec, specials, pre);
    // In a repair, a fix that rewrote the inode stamped its checksum:
    // e2fsck reads the inode again (`recheck_bad_inode_checksum`) and
    // finds nothing more to say. (Problems found here but said and fixed
    // in a later pass, as e2fsck's pass 2 `process_bad_inode`, come after.)
    let rewritten = rewritten_since(c, from, ino);
    if c.take_csum_due() && !rewritten {
        c.report(Subject::Inode(ino)).error_fix(
            1,
            ProblemCode::PR_1_INODE_ONLY_CSUM_INVALID,
            format!("Inode {ino} passes checks, but checksum does not match inode."),
            Fix::InodeChecksum(ino),
        );
    }
}

/// Whether a pass-1 fix made since problem `from` rewrites inode `ino`
/// in this run (never with -n): e2fsck's `recheck_bad_inode_checksum`
/// then reads a stamped record and asks nothing about its checksum.
fn rewritten_since(c: &Ctx, from: usize, ino: u32) -> bool {
    c.repairing()
        && c.problems().list().get(from..).is_some_and(|made| {
            made.iter()
                .any(|p| p.pass == 1 && p.fix.as_ref().is_some_and(|f| f.rewrites_inode(ino)))
        })
}

/// The checks of one inode record, in e2fsck's order: which inodes are
/// looked into at all ([`screen`]), the fields that must be zero, the file
/// type, the format flags, the xattrs, the block map, the rules of each
/// kind of file, `i_blocks`, the directory layout and size, and what pass 2
/// needs of a directory.
fn check_inode_fields(c: &mut Ctx, ino: u32, rec: &[u8], specials: &[u32], pre: u8) {
    let Some(inode) = inode_of(rec) else { return };
    let inode: &Inode = &inode;
    let Some(used) = screen(c, ino, inode, rec, specials, pre) else {
        return;
    };
    casefold_flag(c, ino, inode);
    zero_fields(c, ino, inode, rec);
    let Some(kind) = file_kind(c, ino, inode, used.quota_file) else {
        return;
    };
    let Some(FormatFlags {
        flags,
        truncated_dir,
    }) = format_flags(c, ino, inode, rec, kind)
    else {
        return;
    };
    // e2fsck's pass 1 is done with a valid inline-data symlink before
    // check_blocks: its xattr block is neither counted nor charged.
    let inline_symlink = kind == FileKind::Symlink
        && flags.contains(InodeFlags::INLINE_DATA)
        && crate::symlink::valid(c, ino, inode);
    let (ea_blocks, ea_inode_values) = if inline_symlink {
        (0, false)
    } else {
        let inline = flags.contains(InodeFlags::INLINE_DATA)
            && c.sb().has_incompat(Incompat::INLINE_DATA)
            && ino >= c.sb().first_ino();
        crate::pass1_xattr::xattrs(c, ino, inode, rec, inline)
    };
    let Mapped {
        mut map,
        fast_symlink,
        bogus_dev,
    } = map_blocks(c, ino, inode, kind, flags);
    if map.cleared {
        // Too many illegal blocks: cleared as e2fsck does (its restart
        // drops what the walk claimed; the next round frees it here).
        return;
    }
    kind_rules(c, ino, inode, kind, flags, bogus_dev);
    if kind == FileKind::Regular && inode.size() >= 0x8000_0000 {
        c.count_large_file();
    }
    if kind == FileKind::Directory
        && (truncated_dir || !flags.contains(InodeFlags::INLINE_DATA))
        && map.blocks + ea_blocks == 0
    {
        // As e2fsck: nothing to keep, so the inode goes (and the names of
        // it with it), rather than a block 0 being made for it.
        c.report(Subject::Inode(ino)).error_fix(
            1,
            ProblemCode::PR_1_ZERO_LENGTH_DIR,
            format!("Inode {ino} is a zero-length directory."),
            Fix::ClearInode(ino),
        );
        return;
    }
    let charge = Charge {
        flags,
        ea_blocks,
        ea_inode_values,
        inline_symlink,
        fast_symlink,
    };
    blocks_count(c, ino, inode, rec, &map, &charge);
    if kind == FileKind::Directory && !map.bad && dir_holes(c, ino, flags, &map) {
        collapse_runs(&mut map);
    }
    if !map.bad && !flags.contains(InodeFlags::INLINE_DATA) && !fast_symlink {
        check_size(c, ino, inode, kind, &map);
    } else if kind == FileKind::Regular && flags.contains(InodeFlags::INLINE_DATA) {
        inline_file_size(c, ino, inode, flags);
    }
    if kind == FileKind::Directory {
        record_dir(c, ino, inode, rec, flags, &map);
    }
    stats(
        c,
        kind,
        fast_symlink,
        used.links,
        &map,
        map.blocks + ea_blocks,
    );
    register(c, ino, used.is_special, kind, flags, used.links);
}

/// What [`screen`] learnt of an inode in use that is to be checked.
struct InUse {
    /// The superblock names it (journal, quota, orphan file...).
    is_special: bool,
    /// A reserved user or group quota inode: a file whatever its mode.
    quota_file: bool,
    links: u16,
}

/// Which inodes are checked further: the journal rebuilt from its backup,
/// reserved inodes (checked here, see [`reserved`]), inodes unused, in bad
/// blocks or in a block of garbage are not; `None` for those.
fn screen(
    c: &mut Ctx,
    ino: u32,
    inode: &Inode,
    rec: &[u8],
    specials: &[u32],
    pre: u8,
) -> Option<InUse> {
    if c.journal_backup_serves(ino) {
        // Rebuilt from the superblock's copy (pass 0 claimed its blocks).
        if ino >= c.sb().first_ino() {
            c.note_extra_used(ino);
        }
        return None;
    }
    let first_ino = c.sb().first_ino();
    let links = inode.links_count();
    let is_special = specials.contains(&ino);
    if ino < first_ino && ino != special::ROOT && !is_special {
        reserved(c, ino, inode, rec, pre);
        return None;
    }
    if crate::pass1_rules::stray_orphan_file(c, ino, inode) {
        return None;
    }
    if is_special {
        crate::pass1_rules::special_mode(c, ino, inode);
    }
    if pre & PRE_ZERO != 0 {
        return None;
    }
    // Inodes stored in a block on the bad block list do not exist for the
    // check (e2fsck skips them too); names of them are cleared.
    if crate::badblocks::inode_in_bad_block(c, ino) {
        return None;
    }
    // An in-use inode in a block of garbage is cleared unchecked (e2fsck's
    // PR_1_INODE_IS_GARBAGE); with checksums, one that verifies is kept.
    if pre & PRE_GARBAGE != 0
        && links > 0
        && (ino >= first_ino || ino == special::ROOT)
        && !is_special
        && (pre & PRE_BAD_CSUM != 0 || !c.csum())
    {
        c.report(Subject::Inode(ino)).error_fix(
            1,
            ProblemCode::PR_1_INODE_IS_GARBAGE,
            format!("Inode {ino} seems to contain garbage."),
            Fix::ClearInode(ino),
        );
        return None;
    }
    // Deleted inodes keep a valid checksum too: e2fsck checks them all.
    // It says so once the inode's other checks are done (its
    // FINISH_INODE_LOOP; in a repair only when no other fix rewrote the
    // inode, see `check_inode`).
    if pre & PRE_BAD_CSUM != 0 {
        c.csum_due();
    }
    orphan_dtime(c, ino, inode);
    // The reserved quota inodes the superblock names are files whatever
    // their link count and mode say: e2fsck checks only their blocks.
    let quota_file = is_special
        && c.sb().has_ro_compat(RoCompat::QUOTA)
        && (ino == special::USR_QUOTA || ino == special::GRP_QUOTA);
    if links == 0 && !quota_file {
        return None;
    }
    Some(InUse {
        is_special,
        quota_file,
        links,
    })
}

/// A reserved inode below `s_first_ino` (not the root, not one the
/// superblock names): garbage is zeroed, the rest judged by
/// [`reserved_inode`], and a bad checksum on one found otherwise sound
/// rewritten.
fn reserved(c: &mut Ctx, ino: u32, inode: &Inode, rec: &[u8], pre: u8) {
    let links = inode.links_count();
    // A reserved inode in a block of garbage holds nothing worth
    // keeping: e2fsck clears it and zeroes its map; the record is
    // zeroed here (the bad block, resize and journal inodes have
    // their own checks).
    if pre & PRE_GARBAGE != 0
        && links > 0
        && !matches!(ino, special::BAD | special::RESIZE | special::JOURNAL)
        && (pre & PRE_BAD_CSUM != 0 || !c.csum())
    {
        c.report(Subject::Inode(ino)).error_fix(
            1,
            ProblemCode::PR_1_INODE_IS_GARBAGE,
            format!("Inode {ino} seems to contain garbage."),
            Fix::ZeroInode(ino),
        );
        return;
    }
    if pre & PRE_ZERO == 0 && ino != special::JOURNAL {
        orphan_dtime(c, ino, inode);
    }
    let bad_csum = pre & PRE_BAD_CSUM != 0;
    let from = c.problems().mark();
    reserved_inode(c, ino, inode, rec, bad_csum);
    // As e2fsck's FINISH_INODE_LOOP: the checksum is asked about unless a
    // fix rewrote the inode (stamping it). With -n nothing is rewritten,
    // so a reserved inode with a bad mode gets both questions.
    if bad_csum && !rewritten_since(c, from, ino) {
        c.report(Subject::Inode(ino)).error_fix(
            1,
            ProblemCode::PR_1_INODE_ONLY_CSUM_INVALID,
            format!("Inode {ino} passes checks, but checksum does not match inode."),
            Fix::InodeChecksum(ino),
        );
    }
}

/// Fields an inode in use must leave zero or unset (e2fsck's
/// process_bad_inode: the high words without the features that use them,
/// the Hurd's fragment fields, `i_faddr`), the imagic flag, `i_dtime`, and
/// timestamps before the epoch.
fn zero_fields(c: &mut Ctx, ino: u32, inode: &Inode, rec: &[u8]) {
    if !c.wide() && inode.l_i_file_acl_high.get() != 0 {
        c.report(Subject::Inode(ino)).error_fix(
            2,
            ProblemCode::PR_2_I_FILE_ACL_HI_ZERO,
            format!(
                "i_file_acl_hi for inode {ino} ({}) is {}, should be zero.",
                crate::pathname::q(ino),
                inode.l_i_file_acl_high.get()
            ),
            Fix::InodeClearFileAclHigh(ino),
        );
    }
    // e2fsck's process_bad_inode: without huge_file the high word of
    // i_blocks must be zero (Linux only; the Hurd keeps other data there).
    if !c.sb().has_ro_compat(RoCompat::HUGE_FILE)
        && c.sb().s_creator_os.get() == ext4r_format::superblock::OS_LINUX
        && inode.l_i_blocks_high.get() != 0
    {
        c.report(Subject::Inode(ino)).error_fix(
            2,
            ProblemCode::PR_2_BLOCKS_HI_ZERO,
            format!(
                "i_blocks_hi for inode {ino} ({}) is {}, should be zero.",
                crate::pathname::q(ino),
                inode.l_i_blocks_high.get()
            ),
            Fix::InodeClearBlocksHigh(ino),
        );
    }
    // e2fsck's PR_1_SET_IMAGIC: the AFS-server flag means nothing without
    // the imagic_inodes feature.
    if inode.flags().contains(InodeFlags::IMAGIC) && !c.sb().has_compat(Compat::IMAGIC_INODES) {
        c.report(Subject::Inode(ino)).error_fix(
            1,
            ProblemCode::PR_1_SET_IMAGIC,
            format!("Inode {ino} has imagic flag set."),
            Fix::InodeClearFlags(ino, InodeFlags::IMAGIC.bits()),
        );
    }
    // The Hurd keeps fragment fields in osd2 (e2fsck's process_bad_inode
    // judges them only there).
    if c.sb().s_creator_os.get() == OS_HURD {
        for (at, code, what) in [
            (0x74, ProblemCode::PR_2_FRAG_ZERO, "i_frag"),
            (0x75, ProblemCode::PR_2_FSIZE_ZERO, "i_fsize"),
        ] {
            if let Some(&v) = rec.get(at).filter(|&&v| v != 0) {
                c.report(Subject::Inode(ino)).error_fix(
                    2,
                    code,
                    format!(
                        "{what} for inode {ino} ({}) is {v}, should be zero.",
                        crate::pathname::q(ino)
                    ),
                    Fix::InodeZeroByte(ino, at),
                );
            }
        }
    }
    if inode.i_obso_faddr.get() != 0 {
        c.report(Subject::Inode(ino)).error_fix(
            2,
            ProblemCode::PR_2_FADDR_ZERO,
            format!(
                "i_faddr for inode {ino} ({}) is {}, should be zero.",
                crate::pathname::q(ino),
                inode.i_obso_faddr.get()
            ),
            Fix::InodeClearFaddr(ino),
        );
    }
    if inode.dtime() != 0 {
        // The root's own code first (old mke2fs left a dtime there); e2fsck
        // then asks about any inode in use with a dtime, the root again
        // when -n has left it.
        if ino == special::ROOT {
            c.report(Subject::Inode(ino)).error_fix(
                1,
                ProblemCode::PR_1_ROOT_DTIME,
                "Root inode has dtime set (probably due to old mke2fs).".into(),
                Fix::InodeClearDtime(ino),
            );
        }
        if ino != special::ROOT || !c.repairing() {
            c.report(Subject::Inode(ino)).error_fix(
                1,
                ProblemCode::PR_1_SET_DTIME,
                format!("Inode {ino} is in use, but has dtime set."),
                Fix::InodeClearDtime(ino),
            );
        }
    }
    crate::pass1_rules::negative_epoch(c, ino, inode, rec);
}

/// The kind of file the rest of the checks judge the inode as: its mode's,
/// or a directory when a device-like mode holds what looks like one
/// (e2fsck's check_is_really_dir); `None` when the root is no directory
/// and is cleared.
fn file_kind(c: &mut Ctx, ino: u32, inode: &Inode, quota_file: bool) -> Option<FileKind> {
    let mut kind = if quota_file {
        FileKind::Regular
    } else {
        FileKind::from_mode(inode.mode())
    };
    // e2fsck's check_is_really_dir looks at every mode that is not a
    // directory, a file or a symlink (an unknown one too).
    let special_kind = matches!(
        kind,
        FileKind::CharDevice
            | FileKind::BlockDevice
            | FileKind::Fifo
            | FileKind::Socket
            | FileKind::Unknown
    );
    if special_kind && crate::really_dir::looks_like_dir(c, ino, inode) {
        c.report(Subject::Inode(ino)).error_fix(
            1,
            ProblemCode::PR_1_TREAT_AS_DIRECTORY,
            format!(
                "Inode {ino} is a {} but it looks like it is really a directory.",
                type_words(inode.mode())
            ),
            Fix::InodeMode(ino, (inode.mode() & 0o7777) | 0o040000),
        );
        // A repair goes on as e2fsck does, with the inode a directory.
        if c.repairing() {
            kind = FileKind::Directory;
        }
    }
    if ino == special::ROOT && kind != FileKind::Directory {
        // As e2fsck: cleared, and made anew by pass 3.
        c.report(Subject::Inode(ino)).error_fix(
            1,
            ProblemCode::PR_1_ROOT_NO_DIR,
            "Root inode is not a directory.".into(),
            Fix::ClearInode(ino),
        );
        return None;
    }
    Some(kind)
}

/// The inode's flags as the later checks read them, after [`format_flags`].
struct FormatFlags {
    flags: InodeFlags,
    /// A directory whose inline data a repair truncates (no attribute).
    truncated_dir: bool,
}

/// The flags that say how the inode holds its data (inline data, extents,
/// index, encryption) against the features and each other, and the extra
/// size (e2fsck's check_inode_extra_space); in a repair, the flags as the
/// fixes leave them. `None` when the inode is cleared.
fn format_flags(
    c: &mut Ctx,
    ino: u32,
    inode: &Inode,
    rec: &[u8],
    kind: FileKind,
) -> Option<FormatFlags> {
    let mut flags = inode.flags();
    if let Some((code, msg, fix, left)) =
        crate::idata_extents::resolve(c, ino, inode, kind, rec.len())
    {
        let cleared = matches!(fix, Fix::ClearInode(_));
        c.report(Subject::Inode(ino)).error_fix(1, code, msg, fix);
        if cleared {
            return None;
        }
        // A repair goes on with the flags it leaves (as e2fsck).
        if c.repairing() {
            flags = left;
        }
    }
    let inline_attr =
        flags.contains(InodeFlags::INLINE_DATA) && has_inline_attr(c, ino, inode, rec);
    match crate::pass1_rules::format_flags(c, ino, inode, flags, inline_attr) {
        crate::pass1_rules::Verdict::Go(f) => flags = f,
        crate::pass1_rules::Verdict::Cleared => return None,
    }
    if flags.contains(InodeFlags::ENCRYPT) && !crate::pass1_rules::encryption_context(c, ino) {
        return None;
    }
    let mut truncated_dir = false;
    if flags.contains(InodeFlags::INLINE_DATA)
        && c.sb().has_incompat(Incompat::INLINE_DATA)
        && ino >= c.sb().first_ino()
        && !inline_attr
    {
        // As e2fsck: without its system.data attribute (or with xattrs
        // that cannot be read) the inline data cannot be trusted.
        c.report(Subject::Inode(ino)).error_fix(
            1,
            ProblemCode::PR_1_INLINE_DATA_NO_ATTR,
            format!("Inode {ino} has INLINE_DATA_FL flag but extended attribute not found."),
            Fix::InlineTruncate(ino),
        );
        // A repair goes on with what the truncation leaves: no data, no
        // flag and no block pointers. A directory so emptied is e2fsck's
        // zero-length directory (said after the extra-size check, in its
        // check_blocks).
        if c.repairing() && kind == FileKind::Directory {
            truncated_dir = true;
        }
    }
    // After the format flags, as e2fsck's check_inode_extra_space.
    if rec.len() > 128 && inode.check_extra_isize(rec.len()).is_err() {
        c.report(Subject::Inode(ino)).error_fix(
            1,
            ProblemCode::PR_1_EXTRA_ISIZE,
            format!(
                "Inode {ino} has a extra size ({}) which is invalid",
                inode.i_extra_isize.get()
            ),
            crate::fix::Fix::InodeExtraIsize(
                ino,
                num::sat_u16(rec.len().saturating_sub(128).min(32) & !3),
            ),
        );
    }
    if kind == FileKind::Directory
        && flags.contains(InodeFlags::INDEX)
        && !c.sb().has_compat(Compat::DIR_INDEX)
    {
        c.report(Subject::Inode(ino)).error_fix(
            1,
            ProblemCode::PR_1_HTREE_SET,
            format!("Inode {ino} has INDEX_FL flag set on filesystem without htree support."),
            Fix::ClearIndexFlag(ino),
        );
        // A repair reads it as the linear directory it becomes.
        if c.repairing() {
            flags.remove(InodeFlags::INDEX);
        }
    }
    Some(FormatFlags {
        flags,
        truncated_dir,
    })
}

/// What [`map_blocks`] found of the inode's data.
struct Mapped {
    map: MapResult,
    fast_symlink: bool,
    /// A device, FIFO or socket inode e2fsck finds bogus: pass 2 clears
    /// it, and pass 1 checks nothing more of it.
    bogus_dev: bool,
}

/// The inode's blocks by the kind of file: a file, directory or slow
/// symlink's extent tree or block map is walked and claimed; a device's
/// `i_block` is judged (e2fsck's check_device_inode); an unknown mode is
/// cleared.
fn map_blocks(c: &mut Ctx, ino: u32, inode: &Inode, kind: FileKind, flags: InodeFlags) -> Mapped {
    let mut map = MapResult::default();
    let mut fast_symlink = false;
    let mut bogus_dev = false;
    match kind {
        FileKind::Regular | FileKind::Directory | FileKind::Symlink => {
            if flags.contains(InodeFlags::INLINE_DATA) {
                // Data in the inode: nothing to claim.
            } else if kind == FileKind::Symlink
                && !crate::pass1_rules::has_valid_blocks(inode, c.wide())
            {
                fast_symlink = true;
                crate::pass1_rules::fast_symlink_flag(c, ino, flags);
            } else if flags.contains(InodeFlags::EXTENTS) {
                map = crate::pass1_extents::extents(c, ino, inode, kind == FileKind::Directory);
            } else {
                map = pass1_map::blockmap(c, ino, inode, kind == FileKind::Directory);
                crate::bigalloc_map::check(c, ino, inode, kind, map.bad || map.cleared);
            }
        }
        FileKind::CharDevice | FileKind::BlockDevice | FileKind::Fifo | FileKind::Socket => {
            bogus_dev = device_inode(c, ino, inode, kind, flags);
        }
        _ => {
            c.report(Subject::Inode(ino)).error_fix(
                2,
                ProblemCode::PR_2_BAD_MODE,
                format!(
                    "Inode {ino} ({}) has invalid mode (0{:o}).",
                    crate::pathname::q(ino),
                    inode.mode()
                ),
                crate::fix::Fix::ClearInode(ino),
            );
        }
    }
    Mapped {
        map,
        fast_symlink,
        bogus_dev,
    }
}

/// e2fsck's check_device_inode: an index or extents flag, or stray
/// `i_block` words on an immutable one, make a device, FIFO or socket
/// inode bogus (true; pass 2 clears it); an inline-data flag only goes.
fn device_inode(c: &mut Ctx, ino: u32, inode: &Inode, kind: FileKind, flags: InodeFlags) -> bool {
    let w = inode.block_words();
    let locked = flags.intersects(InodeFlags::IMMUTABLE | InodeFlags::APPEND);
    let bogus_dev = flags.intersects(InodeFlags::INDEX | InodeFlags::EXTENTS)
        || (locked && w[4..].iter().any(|&x| x != 0));
    if bogus_dev {
        c.report(Subject::Inode(ino)).error_fix(
            2,
            match kind {
                FileKind::CharDevice => ProblemCode::PR_2_BAD_CHAR_DEV,
                FileKind::BlockDevice => ProblemCode::PR_2_BAD_BLOCK_DEV,
                FileKind::Fifo => ProblemCode::PR_2_BAD_FIFO,
                _ => ProblemCode::PR_2_BAD_SOCKET,
            },
            format!(
                "Inode {ino} ({}) is an illegal {}.",
                crate::pathname::q(ino),
                match kind {
                    FileKind::CharDevice => "character device",
                    FileKind::BlockDevice => "block device",
                    FileKind::Fifo => "FIFO",
                    _ => "socket",
                }
            ),
            crate::fix::Fix::ClearInode(ino),
        );
    } else if flags.contains(InodeFlags::INLINE_DATA) {
        c.report(Subject::Inode(ino)).error_fix(
            1,
            ProblemCode::PR_1_SPECIAL_EXTENTS_IDATA,
            format!(
                "Special (device/socket/fifo) file (inode {ino}) has extents\nor \
                 inline-data flag set."
            ),
            Fix::InodeClearFlags(ino, InodeFlags::INLINE_DATA.bits()),
        );
    }
    bogus_dev
}

/// Rules of symlinks and special files: a symlink must be valid, none may
/// be immutable or append-only (e2fsck's check_immutable), a device has no
/// size (its check_size).
fn kind_rules(
    c: &mut Ctx,
    ino: u32,
    inode: &Inode,
    kind: FileKind,
    flags: InodeFlags,
    bogus_dev: bool,
) {
    let bad_symlink = kind == FileKind::Symlink && !crate::symlink::valid(c, ino, inode);
    if bad_symlink {
        c.report(Subject::Inode(ino)).error_fix(
            2,
            ProblemCode::PR_2_INVALID_SYMLINK,
            format!(
                "Symlink {} (inode #{ino}) is invalid.",
                crate::pathname::q(ino)
            ),
            crate::fix::Fix::ClearInode(ino),
        );
    }
    let special_file = matches!(
        kind,
        FileKind::Symlink
            | FileKind::CharDevice
            | FileKind::BlockDevice
            | FileKind::Fifo
            | FileKind::Socket
    );
    let bad_flags = InodeFlags::IMMUTABLE | InodeFlags::APPEND;
    if special_file && !bad_symlink && !bogus_dev && flags.intersects(bad_flags) {
        // e2fsck's PR_NO_OK: not an error, but repaired.
        c.report(Subject::Inode(ino)).harmless_fix(
            1,
            ProblemCode::PR_1_SET_IMMUTABLE,
            format!(
                "Special (device/socket/fifo/symlink) file (inode {ino}) has immutable\nor \
                 append-only flag set."
            ),
            Fix::InodeClearFlags(ino, bad_flags.bits()),
        );
    }
    // e2fsck's check_size, after check_extents_inlinedata and
    // check_immutable.
    let device = matches!(
        kind,
        FileKind::CharDevice | FileKind::BlockDevice | FileKind::Fifo | FileKind::Socket
    );
    if device && !bogus_dev && inode.size() != 0 {
        c.report(Subject::Inode(ino)).error_fix(
            1,
            ProblemCode::PR_1_SET_NONZSIZE,
            format!("Special (device/socket/fifo) inode {ino} has non-zero size."),
            Fix::InodeSize(ino, 0),
        );
    }
}

/// What [`blocks_count`] needs beyond the map.
struct Charge {
    flags: InodeFlags,
    /// Blocks of the inode's xattr block counted (0 or 1).
    ea_blocks: u64,
    /// Some xattr value is kept in an EA inode.
    ea_inode_values: bool,
    inline_symlink: bool,
    fast_symlink: bool,
}

/// `i_blocks` against what the inode holds, and the quota charge of it.
fn blocks_count(c: &mut Ctx, ino: u32, inode: &Inode, rec: &[u8], map: &MapResult, ch: &Charge) {
    let huge = c.sb().has_ro_compat(RoCompat::HUGE_FILE);
    let bs = u64::from(c.geo().block_size);
    let Charge {
        flags,
        ea_blocks,
        ea_inode_values,
        inline_symlink,
        fast_symlink,
    } = *ch;
    // i_blocks counts data, tree blocks and the xattr block, and the
    // values kept in EA inodes, charged to their owner in whole clusters
    // (the kernel's quota charge; e2fsck's size_to_quota_blocks).
    let bigalloc = c.sb().has_ro_compat(RoCompat::BIGALLOC);
    let mapped = !flags.contains(InodeFlags::INLINE_DATA) && !fast_symlink && !map.bad;
    let (charged, ea_inodes) = if ea_inode_values {
        crate::pass1_xattr::ea_inode_charge(c, inode, rec)
    } else {
        (0, 0)
    };
    let blocks = if bigalloc {
        // Whole clusters: each one the inode's blocks (data, tree and
        // xattr block) touch.
        mapped.then(|| cluster_blocks(c, ino, inode, ea_blocks) + charged)
    } else {
        Some(map.blocks + ea_blocks + charged)
    };
    if !inline_symlink {
        // What quota charges is what e2fsck counted, not i_blocks: with
        // nothing mapped, the xattr block's cluster and the EA values.
        let xattr_cluster = if ea_blocks > 0 {
            c.geo().cluster_ratio()
        } else {
            0
        };
        let counted = blocks.unwrap_or(xattr_cluster + charged);
        crate::quota::charge(c, ino, inode, rec, counted * bs, 1 + ea_inodes);
    }
    if let Some(blocks) = blocks.filter(|_| !inline_symlink) {
        let in_fs_blocks = huge && flags.contains(InodeFlags::HUGE_FILE);
        let want = if in_fs_blocks {
            blocks
        } else {
            blocks * (bs / 512)
        };
        let have =
            inode.blocks_count(huge, c.geo().block_size) / if in_fs_blocks { bs / 512 } else { 1 };
        if want != have {
            c.report(Subject::Inode(ino)).error_fix(
                1,
                ProblemCode::PR_1_BAD_I_BLOCKS,
                format!("Inode {ino}, i_blocks is {have}, should be {want}."),
                Fix::InodeBlocks(ino, blocks),
            );
        }
    }
}

/// Directory blocks run from 0 without holes (e2fsck collapses them).
/// True when a repair collapses this directory's.
fn dir_holes(c: &mut Ctx, ino: u32, flags: InodeFlags, map: &MapResult) -> bool {
    let mut next = 0u64;
    for &(l, _, n) in &map.runs {
        if l != next {
            let msg = format!("Directory inode {ino} block {l} should be at block {next}.");
            // Collapsing is done for trees held whole in the inode and
            // for direct block maps; deeper trees are left reported.
            let simple = if flags.contains(InodeFlags::EXTENTS) {
                map.depth == 0
            } else {
                map.end_lblk <= 12
            };
            if simple {
                c.report(Subject::Inode(ino)).error_fix(
                    1,
                    ProblemCode::PR_1_COLLAPSE_DBLOCK,
                    msg,
                    Fix::CollapseDir(ino),
                );
                return c.repairing();
            }
            c.report(Subject::Inode(ino))
                .error(1, ProblemCode::PR_1_COLLAPSE_DBLOCK, msg);
            return false;
        }
        next = l + n;
    }
    false
}

/// The map as a collapse leaves it: the rest of pass 1 (size, htree root)
/// judges the directory as e2fsck checks after its fix, blocks renumbered
/// from 0 in order.
fn collapse_runs(map: &mut MapResult) {
    let mut next = 0u64;
    for r in &mut map.runs {
        r.0 = next;
        next += r.2;
    }
    map.end_lblk = next;
    map.end_init_lblk = next;
}

/// A directory's inline size and htree root, whether pass 3A rebuilds it,
/// and what pass 2 reads of it: its record and its blocks.
fn record_dir(
    c: &mut Ctx,
    ino: u32,
    inode: &Inode,
    rec: &[u8],
    flags: InodeFlags,
    map: &MapResult,
) {
    if flags.contains(InodeFlags::INLINE_DATA) {
        // An inline directory's size is i_block's 60 bytes plus the
        // system.data value, as e2fsck counts it.
        if let Some(want) = inline_size(c, ino) {
            if want != inode.size() {
                c.report(Subject::Inode(ino)).error_fix(
                    1,
                    ProblemCode::PR_1_BAD_I_SIZE,
                    format!("Inode {ino}, i_size is {}, should be {want}.", inode.size()),
                    Fix::InodeSize(ino, want),
                );
            }
        }
    }
    let inline = flags.contains(InodeFlags::INLINE_DATA);
    let htree = htree_root(c, ino, inode, rec, flags, map);
    if htree
        && !inline
        && c.repairing()
        && !map.cleared
        && !flags.contains(InodeFlags::EXTENTS)
        && map.illegal_end > map.end_lblk
    {
        c.note_htree_tail((ino, map.end_lblk, map.illegal_end));
    }
    // e2fsck's pass 1 puts on its rebuild list (when it may write and
    // the filesystem indexes directories) a directory whose index it
    // cleared, and a linear one of three blocks or more by its size
    // (pass 3A indexes or compacts it); see `crate::pass3a`.
    let index_cleared = flags.contains(InodeFlags::INDEX) && !htree;
    let bs = u64::from(c.geo().block_size);
    if c.repairing()
        && c.sb().has_compat(Compat::DIR_INDEX)
        && !inline
        && (index_cleared || (!htree && inode.size() / bs >= 3))
    {
        c.rehash(ino);
    }
    let dir_flags = [
        (inline, DirInfo::INLINE),
        (htree, DirInfo::HTREE),
        (flags.contains(InodeFlags::ENCRYPT), DirInfo::ENCRYPTED),
        (flags.contains(InodeFlags::CASEFOLD), DirInfo::CASEFOLD),
        (map.bad, DirInfo::MAP_BAD),
    ];
    let dir_flags = dir_flags.iter().filter(|f| f.0).fold(0, |a, f| a | f.1);
    c.add_dir(DirInfo::new(ino, inode.generation(), dir_flags));
    for &(l, p, n) in &map.runs {
        for k in 0..n {
            c.add_dir_block(DirBlock {
                phys: p + k,
                ino,
                lblk: l + k,
            });
        }
    }
}

/// Whether the directory is read as an htree: its index flag, unless the
/// root block is bad and the flag is cleared. A sound index of 2 GiB or
/// more counts as a large directory.
fn htree_root(
    c: &mut Ctx,
    ino: u32,
    inode: &Inode,
    rec: &[u8],
    flags: InodeFlags,
    map: &MapResult,
) -> bool {
    let inline = flags.contains(InodeFlags::INLINE_DATA);
    let mut htree = flags.contains(InodeFlags::INDEX);
    if htree && !inline && !map.bad && c.sb().has_compat(Compat::DIR_INDEX) {
        let blk0 = map.runs.iter().find(|r| r.0 == 0).map(|r| r.1);
        // The flags as the filesystem layer would load the inode: not
        // at all with an invalid extra size.
        let loads = rec.len() <= 128 || inode.check_extra_isize(rec.len()).is_ok();
        let read_flags = loads.then(|| inode.flags());
        if let Some((code, msg)) =
            crate::htree_root::bad_root(c, ino, read_flags, blk0, map.end_lblk)
        {
            c.report(Subject::Inode(ino))
                .error_fix(1, code, msg, Fix::ClearIndexFlag(ino));
            // Read as the linear directory it becomes.
            htree = false;
        } else if inode.size() >= 0x8000_0000 {
            // e2fsck's handle_htree counts a sound index of 2 GiB or
            // more (by i_size, before any size repair) as a large
            // directory.
            c.count_large_dir();
        }
    }
    htree
}

/// What pass 4 and the bitmaps need of an inode checked in use: one the
/// superblock names past `s_first_ino` is in use though no entry names it,
/// and the link counts pass 4 compares.
fn register(
    c: &mut Ctx,
    ino: u32,
    is_special: bool,
    kind: FileKind,
    flags: InodeFlags,
    links: u16,
) {
    let first_ino = c.sb().first_ino();
    if is_special && ino >= first_ino {
        c.note_extra_used(ino);
    }
    // e2fsck's pass 4 passes over only the project quota and orphan file
    // inodes among those the superblock names: a user or group quota
    // file in an ordinary inode that no entry names is unattached to it.
    let pass4_skips = is_special
        && ino != special::ROOT
        && !(ino >= first_ino
            && (ino == c.sb().s_usr_quota_inum.get() || ino == c.sb().s_grp_quota_inum.get()));
    if !pass4_skips {
        c.add_inode(ino, links, kind, flags.contains(InodeFlags::EA_INODE));
    }
}

/// `counted`: the blocks the inode's map and xattr block hold (e2fsck's
/// `num_blocks`).
fn stats(c: &mut Ctx, kind: FileKind, fast: bool, links: u16, map: &MapResult, counted: u64) {
    let mut s = crate::report::Summary {
        inodes_used: 1,
        ..Default::default()
    };
    match kind {
        FileKind::Regular => s.regular += 1,
        FileKind::Directory => s.directories += 1,
        FileKind::Symlink => {
            s.symlinks += 1;
            if fast {
                s.fast_symlinks += 1;
            }
        }
        FileKind::CharDevice | FileKind::BlockDevice => s.devices += 1,
        FileKind::Fifo => s.fifos += 1,
        FileKind::Socket => s.sockets += 1,
        _ => {}
    }
    if links > 1 && kind != FileKind::Directory {
        s.multiply_linked += 1;
    }
    // e2fsck's "simplistic fragmentation check": a file larger than a
    // group can never be contiguous, and is not counted.
    if map.fragmented && counted < c.geo().blocks_per_group {
        s.fragmented += 1;
    }
    if map.depth > 0 {
        s.deep_extents += 1;
    }
    c.add_to_summary(&s);
}

/// Reserved inodes below `s_first_ino`: the bad-block list and the resize
/// inode own blocks; the rest are not looked into.
fn reserved_inode(c: &mut Ctx, ino: u32, inode: &Inode, rec: &[u8], bad_csum: bool) {
    casefold_flag(c, ino, inode);
    match ino {
        // As e2fsck: a bad-block inode whose checksum fails is not
        // trusted either (its list would be read through a record that
        // libext2fs refuses, and e2fsck -n then aborts).
        special::BAD if bad_csum || crate::badblocks::bad_inode_invalid(inode) => {
            c.report(Subject::Inode(ino)).error_fix(
                1,
                ProblemCode::PR_1_INVALID_BAD_INODE,
                "The bad block inode looks invalid.".into(),
                Fix::ZeroInode(ino),
            );
        }
        special::BAD
            if inode.links_count() == 0
                && inode.block_words().iter().any(|&w| w != 0)
                && !crate::badblocks::distrusted(c) =>
        {
            let _ = pass1_map::blockmap(c, ino, inode, false);
            crate::bb_tree::finish(c);
        }
        special::RESIZE => {
            // e2fsck's check_blocks counts it like any regular file: its
            // size (past 4 GiB) needs large_file too.
            if inode.is_reg() && inode.size() >= 0x8000_0000 {
                c.count_large_file();
            }
            crate::pass1_rules::reserved(c, ino, inode, rec);
            // Its xattr block is counted (reference, i_blocks) as any
            // inode's: e2fsck's check_blocks reads it for inode 7 too.
            let (xattr_blocks, _) = crate::pass1_xattr::xattrs(c, ino, inode, rec, false);
            crate::resize_inode::check(c, inode, xattr_blocks)
        }
        // Only reached when the superblock names no journal here.
        special::JOURNAL
            if inode.links_count() != 0
                || inode.i_blocks_lo.get() != 0
                || inode.block_words()[0] != 0 =>
        {
            c.report(Subject::Inode(ino)).error_fix(
                1,
                ProblemCode::PR_1_JOURNAL_INODE_NOT_CLEAR,
                "Journal inode is not in use, but contains data.".into(),
                Fix::ZeroInode(ino),
            );
        }
        special::BAD | special::JOURNAL => {}
        _ => crate::pass1_rules::reserved(c, ino, inode, rec),
    }
}

/// The casefold flag belongs on directories of a casefold filesystem
/// (e2fsck checks it on every in-use and reserved inode).
fn casefold_flag(c: &mut Ctx, ino: u32, inode: &Inode) {
    if !inode.flags().contains(InodeFlags::CASEFOLD) {
        return;
    }
    let fix = Fix::InodeClearFlags(ino, InodeFlags::CASEFOLD.bits());
    if !inode.is_dir() {
        c.report(Subject::Inode(ino)).error_fix(
            1,
            ProblemCode::PR_1_CASEFOLD_NONDIR,
            format!("Inode {ino} has the casefold flag set but is not a directory."),
            fix,
        );
    } else if !c.sb().has_incompat(Incompat::CASEFOLD) {
        c.report(Subject::Inode(ino)).error_fix(
            1,
            ProblemCode::PR_1_CASEFOLD_FEATURE,
            format!(
                "Directory {ino} has the casefold flag, but the\ncasefold feature is not enabled."
            ),
            fix,
        );
    }
}

/// Leftovers of an orphan list that was not processed, as e2fsck's pass 1
/// finds them: a deletion time below the inode count is an orphan link
/// (cleared, or set to now for a deleted inode); a deleted inode with a
/// mode and no deletion time gets one.
fn orphan_dtime(c: &mut Ctx, ino: u32, inode: &Inode) {
    let sb = c.sb();
    let count = sb.s_inodes_count.get();
    let low = |t: u32| t != 0 && t < count;
    // Clocks that were never set make small times legitimate (looked at
    // only for a low dtime: nearly every inode has none).
    let low_check =
        || !(low(sb.s_wtime.get()) || low(sb.s_mtime.get()) || low(sb.s_mkfs_time.get()));
    let dtime = inode.dtime();
    let links = inode.links_count();
    if low(dtime) && low_check() {
        let fix = if links != 0 {
            Fix::InodeClearDtime(ino)
        } else {
            Fix::ClearInode(ino)
        };
        c.report(Subject::Inode(ino)).error_fix(
            1,
            ProblemCode::PR_1_LOW_DTIME,
            format!("Inode {ino} was part of the orphaned inode list."),
            fix,
        );
        c.latch_last(
            ProblemCode::PR_1_ORPHAN_LIST_REFUGEES,
            "Inodes that were part of a corrupted orphan linked list found.".into(),
        );
    }
    if links == 0 && dtime == 0 && inode.mode() != 0 && ino >= c.sb().first_ino() {
        c.report(Subject::Inode(ino)).error_fix(
            1,
            ProblemCode::PR_1_ZERO_DTIME,
            format!("Deleted inode {ino} has zero dtime."),
            Fix::ClearInode(ino),
        );
    }
}

/// The blocks of the clusters an inode's blocks lie in (bigalloc).
fn cluster_blocks(c: &Ctx, ino: u32, inode: &Inode, ea_blocks: u64) -> u64 {
    let bits = c.geo().cluster_bits;
    let mut clusters: std::collections::BTreeSet<u64> = crate::dup::pointers(c.fs(), ino)
        .map(|(_, p)| {
            p.iter()
                .flat_map(|&(_, b, n, _)| (b >> bits)..=((b + n.max(1) - 1) >> bits))
                .collect()
        })
        .unwrap_or_default();
    if ea_blocks > 0 {
        clusters.insert(inode.file_acl(c.wide()).0 >> bits);
    }
    (clusters.len() as u64) << bits
}

/// 60 bytes plus the `system.data` value's length, when it reads.
fn inline_size(c: &Ctx, ino: u32) -> Option<u64> {
    let rec = c.fs().inode_record(InodeNr(ino)).ok()?;
    let (_, n) = crate::inline_dir::data_range(&rec)?;
    Some(60 + n as u64)
}

/// Whether the inode's xattrs read and include `system.data`.
fn has_inline_attr(c: &Ctx, ino: u32, inode: &Inode, rec: &[u8]) -> bool {
    let Ok(info) = c.fs().inode(InodeNr(ino)) else {
        return false;
    };
    let found = c.fs().xattrs(&info).is_ok_and(|xs| {
        xs.iter()
            .any(|x| ext4r_format::xattr::xattr_name_is(&x.name, b"system.data"))
    });
    found && crate::pass1_xattr::libext2fs_reads(c, inode, rec)
}

fn check_size(c: &mut Ctx, ino: u32, inode: &Inode, kind: FileKind, map: &MapResult) {
    let bs = u64::from(c.geo().block_size);
    let size = inode.size();
    let bad = match kind {
        FileKind::Directory => {
            let nblock = size / bs;
            size % bs != 0
                || nblock > map.end_lblk
                || (nblock < map.end_lblk
                    && map.end_lblk - nblock > u64::from(c.sb().s_prealloc_dir_blocks))
        }
        FileKind::Regular => {
            // fs-verity keeps its Merkle tree in blocks past i_size
            // (e2fsck's check_blocks exempts EXT4_VERITY_FL).
            (map.end_init_lblk > 0
                && size < (map.end_init_lblk - 1) * bs
                && !inode.flags().contains(InodeFlags::VERITY))
                // Past what a block map can address (e2fsck's
                // ext2_max_sizes: 12 + p + p^2 + p^3 blocks).
                || (!inode.flags().contains(InodeFlags::EXTENTS)
                    && size > crate::pass1_rules::blockmap_max_bytes(bs))
                || (inode.flags().contains(InodeFlags::EXTENTS)
                    && size > (1u64 << (32 + bs.trailing_zeros())) - 1)
        }
        _ => false,
    };
    if bad {
        bad_size(c, ino, size, kind, map);
    }
}

/// A regular file with inline data is held to a block map's largest size
/// (e2fsck's check_blocks: it has no extent flag, and no block, so the
/// size it should have is 0); the repair truncates it as e2fsck does,
/// i_block and the inline-data flag cleared with the size.
fn inline_file_size(c: &mut Ctx, ino: u32, inode: &Inode, flags: InodeFlags) {
    let bs = u64::from(c.geo().block_size);
    let size = inode.size();
    if flags.contains(InodeFlags::EXTENTS) || size <= crate::pass1_rules::blockmap_max_bytes(bs) {
        return;
    }
    c.report(Subject::Inode(ino)).error_fix(
        1,
        ProblemCode::PR_1_BAD_I_SIZE,
        format!("Inode {ino}, i_size is {size}, should be 0."),
        Fix::InlineTruncate(ino),
    );
}

/// The report of [`check_size`], out of line: its formatting made the
/// frame of a check that nearly always passes.
#[cold]
#[inline(never)]
fn bad_size(c: &mut Ctx, ino: u32, size: u64, kind: FileKind, map: &MapResult) {
    let bs = u64::from(c.geo().block_size);
    // A directory with holes gets its blocks moved together first (not
    // done yet); sizing it to a far block would make it huge for nothing.
    let data_blocks: u64 = map.runs.iter().map(|r| r.2).sum();
    let holey_dir = kind == FileKind::Directory && data_blocks != map.end_lblk;
    if holey_dir {
        c.report(Subject::Inode(ino)).error(
            1,
            ProblemCode::PR_1_BAD_I_SIZE,
            format!(
                "Inode {ino}, i_size is {size}, should be {}.",
                map.end_lblk * bs
            ),
        );
    } else {
        c.report(Subject::Inode(ino)).error_fix(
            1,
            ProblemCode::PR_1_BAD_I_SIZE,
            format!(
                "Inode {ino}, i_size is {size}, should be {}.",
                map.end_lblk * bs
            ),
            Fix::InodeSize(ino, map.end_lblk * bs),
        );
    }
}

/// e2fsck's `%It`: an inode's type in words, from its mode.
pub(crate) fn type_words(mode: u16) -> String {
    match mode & 0o170000 {
        0o100000 => "regular file".into(),
        0o040000 => "directory".into(),
        0o020000 => "character device".into(),
        0o060000 => "block device".into(),
        0o010000 => "named pipe".into(),
        0o120000 => "symbolic link".into(),
        0o140000 => "socket".into(),
        _ => format!("unknown file type with mode 0{mode:o}"),
    }
}
