//! Pass 2: every directory block, read in disk order — records, `.` and
//! `..`, what each entry points at, file types, checksums — counting the
//! links each inode gets.

use crate::codes::ProblemCode;
use crate::problem::Subject;
use ext4r::fs::FileKind;
use ext4r_format::dir::{ft, verify_dir_block_checksum, DirBlockIter, DirEntry, DirEntryTail};
use ext4r_format::features::{Compat, Incompat};
use ext4r_format::htree::{parse_dx_root, verify_dx_checksum};
use ext4r_format::inode::ino as special;
use ext4r_format::{num, InodeNr};

use crate::ctx::Progress;
use crate::ctx::{Ctx, DirBlock};
use crate::htree;

mod entry;

use entry::{bad_entry, entry};

/// Bytes read at once when directory blocks are contiguous: small enough
/// that the four buffers in flight (one checked, two queued, one being
/// read) are not a large part of the peak memory, which is in this pass.
const RUN_BYTES: u64 = 64 << 10;

pub(crate) fn run(c: &mut Ctx, progress: Progress<'_>) {
    // The inodes pass 1's findings name by path, to note where this pass
    // meets each first.
    let wanted: Vec<u32> = c
        .problems()
        .list()
        .iter()
        .filter(|p| p.pass == 2)
        .flat_map(|p| crate::pathname::q_wanted(&p.message).collect::<Vec<_>>())
        .collect();
    c.want_q_dirs(wanted);
    walk(c, progress);
    let q_dirs = c.take_q_dirs();
    if q_dirs.is_empty() {
        return;
    }
    let fs = c.shared_fs();
    for p in c.reorder_problems().each_mut() {
        if p.pass == 2 && crate::pathname::q_wanted(&p.message).next().is_some() {
            p.message =
                crate::pathname::fill_q(&fs, &p.message, |i| q_dirs.get(&i).copied().unwrap_or(0));
        }
    }
}

/// The walk over every directory block, then the checks of what it found.
fn walk(c: &mut Ctx, progress: Progress<'_>) {
    htree_tails(c);
    // e2fsck's order of blocks (see `blocks_in_order`): an inline
    // directory's two parts are blocks numbered 0, read before any other
    // block of their kind; with dir_index, every directory's block #0
    // comes before every other block.
    let dx_order = c.sb().has_compat(Compat::DIR_INDEX);
    let mut blocks = blocks_in_order(c, dx_order);
    inline_dirs(
        c,
        if dx_order {
            InlinePart::First
        } else {
            InlinePart::Both
        },
    );
    // With dir_index, the inline parts in `system.data` (e2fsck's block
    // #1) come before the first block past a block #0.
    let mut inline_second = dx_order;
    let bs = u64::from(c.geo().block_size);
    let bsz = num::index(bs);
    let total = blocks.len() as u64;
    let mut saw_block0 = vec![false; c.dirs().len()];
    let mut dx = htree::DxDirs::default();
    // Runs of physically contiguous blocks, each read at once; half as
    // long with several readers, each with runs in flight.
    let run_bytes = if c.threads() > 1 {
        RUN_BYTES / 2
    } else {
        RUN_BYTES
    };
    let runs = contiguous_runs(&blocks, bs, run_bytes);
    // The readers share the directories pass 1 found (not changed from
    // here on; their links are).
    let dirs = c.shared_dirs();
    let fs_seed = c.sb().csum_seed();
    let meta_of = |b: &DirBlock| match dirs.binary_search_by_key(&b.ino, |r| r.ino) {
        Ok(d) => Meta::of(&dirs[d], fs_seed, b.lblk),
        Err(_) => Meta::default(),
    };
    let kinds = c.inodes().kinds();
    let rules = Rules::new(c, &kinds);
    let v0 = htree::version_for(c, c.sb().s_def_hash_version);
    let hseed = c.sb().hash_seed();
    let dev = c.fs().device_shared();
    // The runs, told to the device a window ahead of the readers (see
    // `crate::ahead`): known since pass 1, in the order they are read.
    let ahead = crate::ahead::Ahead::new(&*dev, runs.len(), |r| {
        let (i, j) = runs[r];
        (blocks[i].phys.saturating_mul(bs), (j - i) as u64 * bs)
    });
    // Reads a run of blocks and works out ahead of the checks what needs
    // no shared state (`None`: the read failed); the names in blocks
    // found clean are counted there too.
    let names = c.name_counts();
    let read = |buf: &mut [u8], r: usize| {
        let (i, j) = runs[r];
        ahead.reading(r);
        dev.read_at(buf, blocks[i].phys * bs).ok().map(|()| {
            let meta: Vec<Meta> = blocks[i..j].iter().map(meta_of).collect();
            let pre = prescan(&meta, &blocks[i..j], buf, &rules, v0, &hseed);
            for clean in pre.iter().filter_map(|p| p.clean.as_ref()) {
                for &t in &clean.targets {
                    names.add(&kinds, t);
                }
            }
            pre
        })
    };
    // Names a reader counted in blocks then checked in full (which
    // counts them again): taken back once all are counted.
    let mut recounted: Vec<u32> = Vec::new();
    let mut check = |c: &mut Ctx, r: usize, buf: &[u8], pre: Option<Vec<Pre>>| {
        if c.stopping() {
            return;
        }
        let (i, j) = runs[r];
        progress(2, i as u64, total);
        let Some(pre) = pre else {
            unread(c, &blocks[i..j], &mut inline_second);
            return;
        };
        for (k, b) in blocks[i..j].iter().enumerate() {
            if c.stopping() {
                return;
            }
            if inline_second && b.lblk != 0 {
                inline_second = false;
                inline_dirs(c, InlinePart::Second);
            }
            let block = &buf[k * bsz..(k + 1) * bsz];
            if b.lblk == 0 {
                if let Some(d) = c.dir_idx(b.ino) {
                    saw_block0[d] = true;
                }
            }
            let pre = pre.get(k);
            if let Some(clean) = pre.and_then(|p| p.clean.as_ref()) {
                if apply_clean(c, &mut dx, b, block, clean, pre.and_then(|p| p.range)) {
                    continue;
                }
                recounted.extend(&clean.targets);
            }
            dir_block(c, &mut dx, b, block, pre);
        }
    };
    if c.threads() > 1 && runs.len() > 1 {
        // A reader per thread, this one among them; it checks in order
        // what the readers did not find clean and applies what they did
        // (parents, '..'): a small share of the pass once most blocks are
        // clean. Runs go to the readers a batch at a time (see `batches`),
        // each batch read into one buffer, its runs one after another.
        let batches = batches(&runs, run_bytes / bs);
        let readers = c.threads().min(batches.len());
        let slice = |from: usize, r: usize| {
            let (i, j) = runs[r];
            (i - from) * bsz..(j - from) * bsz
        };
        // Buffers checked come back for the next reads: as many as are in
        // flight, where a new one per batch, allocated by a reader and
        // freed here, left each thread's heap its own slack.
        let spare: std::sync::Mutex<Vec<Vec<u8>>> = std::sync::Mutex::default();
        crate::ordered::ordered(
            batches.len(),
            vec![(); readers],
            // Two batches per reader may wait: with one, the readers
            // waited on this thread while it read a batch of its own
            // (pass 2 of the 2M-file image took 0.11 s; 0.07 s so).
            2 * readers,
            |(), k| {
                let (first, end) = batches[k];
                let from = runs[first].0;
                let mut buf = spare
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .pop()
                    .unwrap_or_default();
                buf.resize((runs[end - 1].1 - from) * bsz, 0);
                let pre: Vec<_> = (first..end)
                    .map(|r| read(&mut buf[slice(from, r)], r))
                    .collect();
                (buf, pre)
            },
            |k, (buf, pre)| {
                let (first, _) = batches[k];
                let from = runs[first].0;
                for (r, pre) in (first..).zip(pre) {
                    check(c, r, &buf[slice(from, r)], pre);
                }
                spare.lock().unwrap_or_else(|e| e.into_inner()).push(buf);
                true
            },
        );
    } else {
        let mut buf = Vec::new();
        for (r, &(i, j)) in runs.iter().enumerate() {
            buf.resize((j - i) * bsz, 0);
            let pre = read(&mut buf, r);
            check(c, r, &buf, pre);
        }
    }
    drop(names);
    // Pass 3A reads the directories it rebuilds again.
    blocks.retain(|b| c.rehashes(b.ino));
    c.keep_dir_blocks(blocks);
    for t in recounted {
        c.name_dropped(t);
    }
    after_walk(c, dx, inline_second, &saw_block0);
}

/// A run of directory blocks that could not be read: each is an error
/// (e2fsck's PR_2_READ_DIRBLOCK), in its place in the order, the inline
/// directories' second parts first when their turn came.
fn unread(c: &mut Ctx, blocks: &[DirBlock], inline_second: &mut bool) {
    for b in blocks {
        if *inline_second && b.lblk != 0 {
            *inline_second = false;
            inline_dirs(c, InlinePart::Second);
        }
        c.report(Subject::InodeAt(b.ino, b.lblk)).error(
            2,
            ProblemCode::PR_2_READ_DIRBLOCK,
            format!(
                "Error reading directory block {} (inode {}).",
                { b.phys },
                { b.ino }
            ),
        );
    }
}

/// What the walk leaves for its end: the inline directories' second parts
/// not yet met (no block past a block #0), the htree indexes it gathered,
/// and the directories whose block #0 it never met.
fn after_walk(c: &mut Ctx, dx: htree::DxDirs, inline_second: bool, saw_block0: &[bool]) {
    if c.stopping() {
        return;
    }
    if inline_second {
        inline_dirs(c, InlinePart::Second);
    }
    if c.stopping() {
        return;
    }
    htree::check(c, dx);
    unallocated_block0(c, saw_block0);
}

/// The directory blocks pass 1 found, each once, in e2fsck's order: by
/// block number, inode and logical block (its dblist's own order), and
/// with dir_index (`dx_order`, its special_dir_block_cmp) every
/// directory's block #0 first. What is found, and which of two names of a
/// directory is its first (the other is the extra link), follows it.
fn blocks_in_order(c: &mut Ctx, dx_order: bool) -> Vec<DirBlock> {
    let mut blocks = c.take_dir_blocks();
    blocks.sort_unstable();
    blocks.dedup_by_key(|b| b.phys);
    blocks.sort_unstable_by_key(|b| (dx_order && b.lblk != 0, b.phys, b.ino, b.lblk));
    // Pass 1 grew it by doubling: up to half of it was slack.
    blocks.shrink_to_fit();
    blocks
}

/// Runs `(first, end)` of `blocks` physically contiguous, each at most
/// `run_bytes` long: each is read at once.
fn contiguous_runs(blocks: &[DirBlock], bs: u64, run_bytes: u64) -> Vec<(usize, usize)> {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut i = 0;
    while i < blocks.len() {
        let mut j = i + 1;
        while j < blocks.len()
            && blocks[j].phys == blocks[j - 1].phys + 1
            && (j - i) as u64 * bs < run_bytes
        {
            j += 1;
        }
        runs.push((i, j));
        i = j;
    }
    runs
}

/// Consecutive runs `(first, end)` of `runs` of at most `max_blocks`
/// blocks in all (or one longer run): what a reader thread reads and hands
/// over at once. Where runs are short (with dir_index every directory's
/// block 0 is read first, each a run of its own, and its other blocks
/// form a run apart) a handover per run cost more than the checks of its
/// blocks: pass 2 on two threads took longer than on one.
fn batches(runs: &[(usize, usize)], max_blocks: u64) -> Vec<(usize, usize)> {
    let max = num::index(max_blocks.max(1));
    let mut out = Vec::new();
    let mut first = 0;
    let mut blocks = 0;
    for (r, &(i, j)) in runs.iter().enumerate() {
        if r > first && blocks + (j - i) > max {
            out.push((first, r));
            first = r;
            blocks = 0;
        }
        blocks += j - i;
    }
    if first < runs.len() {
        out.push((first, runs.len()));
    }
    out
}

/// A directory (not inline) whose block 0 the walk never met has a hole
/// there: e2fsck gives it a new block.
fn unallocated_block0(c: &mut Ctx, saw_block0: &[bool]) {
    for (d, saw) in saw_block0.iter().enumerate() {
        let r = c.dirs()[d];
        if !saw && !r.inline() {
            let msg = format!("Directory inode {} has an unallocated block #0.", r.ino);
            // As e2fsck: a new block with '.' and '..' (pass 3 sets the
            // parent).
            // A tree repaired this round (an invalid extent removed) is
            // given its block 0 in the next, once it is what it will be.
            let block = if r.map_bad() {
                None
            } else {
                crate::lost_found::reserve_block(c)
            };
            match block {
                Some(b) => c.report(Subject::InodeAt(r.ino, 0)).error_fix(
                    2,
                    ProblemCode::PR_2_DIRECTORY_HOLE,
                    msg,
                    crate::fix::Fix::DirBlock0(r.ino, b, r.owner()),
                ),
                None => c.report(Subject::InodeAt(r.ino, 0)).error(
                    2,
                    ProblemCode::PR_2_DIRECTORY_HOLE,
                    msg,
                ),
            }
        }
    }
}

/// What the reader thread works out per block ahead of the checks.
#[derive(Clone, Debug, Default)]
struct Pre {
    /// (checksum tail present, checksum matches), with metadata_csum.
    csum: Option<(bool, bool)>,
    /// Lowest and highest name hash, for htree leaves, with the version.
    range: Option<(u32, u32, u8)>,
    /// No two names of the block as it reads (the in-use records up to
    /// the first that does not parse) can be the same.
    unique: bool,
    /// The block has nothing to report (see [`Rules::clean`]): what its
    /// entries change, for this thread to apply in order.
    clean: Option<Clean>,
}

/// What a block's directory tells the reader threads.
#[derive(Clone, Copy, Debug, Default)]
struct Meta {
    /// The directory's checksum seed.
    seed: u32,
    /// An htree leaf whose names are hashed.
    hashed: bool,
    htree: bool,
    /// Neither encrypted, nor case-folded, nor inline: its entries follow
    /// the rules [`Rules::clean`] knows.
    plain: bool,
}

impl Meta {
    /// Block `lblk` of directory `r`, on a filesystem seeded `fs_seed`.
    fn of(r: &crate::ctx::DirInfo, fs_seed: u32, lblk: u64) -> Meta {
        Meta {
            seed: r.seed(fs_seed),
            // Block 0 of an htree is its root, not a leaf of hashed names.
            hashed: r.htree() && !r.encrypted() && !r.casefold() && lblk > 0,
            htree: r.htree(),
            // Its blocks may be judged clean ahead (see `Rules`).
            plain: !r.encrypted() && !r.casefold() && !r.inline(),
        }
    }
}

/// A block with nothing to report: what checking it changes.
#[derive(Clone, Debug, Default)]
struct Clean {
    /// `..`: (target, offset).
    dotdot: Option<(u32, u32)>,
    /// Directories named (past `.` and `..`), in entry order: each gets
    /// this directory as its parent, unless one already has one (then the
    /// block is checked in full, which reports it).
    subdirs: Vec<u32>,
    /// Every inode named (`.` and `..` too), in entry order: each counts
    /// one more name (counted by the reader that found the block clean).
    targets: Vec<u32>,
}

/// What judging a block clean ahead of the checks needs: what
/// [`dir_block`] and [`entry`] look at for a block of a plain directory,
/// without the state they change (parents, link counts).
struct Rules<'a> {
    csum: bool,
    filetype: bool,
    repairing: bool,
    inodes_count: u32,
    first_ino: u32,
    hidden: [u32; 4],
    kinds: &'a crate::inode_map::Kinds,
}

impl<'a> Rules<'a> {
    fn new(c: &Ctx, kinds: &'a crate::inode_map::Kinds) -> Self {
        Rules {
            csum: c.csum(),
            filetype: c.sb().has_incompat(Incompat::FILETYPE),
            repairing: c.repairing(),
            inodes_count: c.sb().s_inodes_count.get(),
            first_ino: c.sb().first_ino(),
            hidden: [
                c.sb().s_usr_quota_inum.get(),
                c.sb().s_grp_quota_inum.get(),
                c.sb().s_prj_quota_inum.get(),
                c.sb().s_orphan_file_inum.get(),
            ],
            kinds,
        }
    }

    /// What checking `block` changes, when [`dir_block`] would find
    /// nothing to report in it; `None` when it might (then it does the
    /// check). Each test is one of the checks there, in their order.
    /// `records` are the block's records up to the first that does not
    /// parse, `broken` whether one does not.
    fn clean(
        &self,
        m: &Meta,
        b: &DirBlock,
        block: &[u8],
        records: &[DirEntry<'_>],
        broken: bool,
        pre: &Pre,
    ) -> Option<Clean> {
        let dir = b.ino;
        // Roots and interior nodes of an index have their own checks.
        if !m.plain || m.htree && (b.lblk == 0 || is_dx_node(block, self.csum)) {
            return None;
        }
        if self.csum && pre.csum != Some((true, true)) {
            return None;
        }
        // A block 0 of a repair may have its '.' split.
        if !pre.unique || self.repairing && b.lblk == 0 {
            return None;
        }
        // A record that does not parse is reported.
        if broken {
            return None;
        }
        // Room for every name at once (growing the list was a tenth of
        // this function).
        let mut out = Clean {
            targets: Vec::with_capacity(records.len()),
            ..Clean::default()
        };
        for (pos, e) in records.iter().enumerate() {
            let slot = if b.lblk == 0 { pos } else { 2 + pos };
            let (name, target) = (e.name, e.inode.0);
            let dots = name == b"." || name == b"..";
            // '.' and '..' end in a NUL.
            let unterminated = || {
                block
                    .get(e.offset + 8 + name.len())
                    .is_some_and(|&x| x != 0)
            };
            if slot < 2 && target != 0 && b.phys != 0 && dots && unterminated() {
                return None;
            }
            match slot {
                0 if name != b"." || target != dir || e.rec_len > 24 => return None,
                1 if name != b".." || target == 0 => return None,
                1 => out.dotdot = Some((target, u32::try_from(e.offset).ok()?)),
                _ if target != 0 && dots => return None,
                _ => {}
            }
            if target == 0 {
                continue;
            }
            if slot > 1 && (name.is_empty() || slash_or_nul(name)) {
                return None;
            }
            if target > self.inodes_count
                || (target < self.first_ino && target != special::ROOT)
                || self.hidden.contains(&target)
                || slot > 1 && (target == dir || target == special::ROOT)
            {
                return None;
            }
            let kind = self.kinds.kind(target)?;
            let ft_ok = if self.filetype {
                e.file_type != ft::UNKNOWN && e.file_type == kind.dirent_type()
            } else {
                e.file_type == 0
            };
            if !ft_ok {
                return None;
            }
            if slot > 1 && kind == FileKind::Directory {
                out.subdirs.push(target);
            }
            out.targets.push(target);
        }
        Some(out)
    }
}

/// Applies what a clean block changes (see [`Rules::clean`]), in the
/// order [`dir_block`] would; `false`, with nothing changed, when a
/// directory it names already has a parent (then it is checked in full).
fn apply_clean(
    c: &mut Ctx,
    dx: &mut htree::DxDirs,
    b: &DirBlock,
    block: &[u8],
    clean: &Clean,
    range: Option<(u32, u32, u8)>,
) -> bool {
    let Some(d) = c.dir_idx(b.ino) else {
        return false;
    };
    let subdirs: Vec<Option<usize>> = clean.subdirs.iter().map(|&t| c.dir_idx(t)).collect();
    for (i, td) in subdirs.iter().enumerate() {
        if let Some(td) = *td {
            if c.links(td).parent != 0 || subdirs[..i].contains(&Some(td)) {
                return false;
            }
        }
    }
    if let Some((target, off)) = clean.dotdot {
        c.found_dotdot(d, target, b.phys, num::index(u64::from(off)));
    }
    for td in subdirs.into_iter().flatten() {
        c.found_parent(td, b.ino);
    }
    // The names are counted by the reader.
    let hashed = c.dirs()[d].htree() && !c.dirs()[d].encrypted() && !c.dirs()[d].casefold();
    if hashed && b.lblk > 0 {
        let names = || {
            DirBlockIter::new(block)
                .map_while(Result::ok)
                .filter(|e| e.inode.0 != 0)
                .map(|e| e.name)
                .collect::<Vec<_>>()
        };
        htree::note_leaf(c, dx, b.ino, b.lblk, names, range);
    }
    true
}

/// The per-block work that needs no shared state, done by the reader
/// threads while this one checks the blocks before (see pass 1's).
fn prescan(
    meta: &[Meta],
    blocks: &[DirBlock],
    buf: &[u8],
    rules: &Rules<'_>,
    v0: u8,
    hseed: &[u32; 4],
) -> Vec<Pre> {
    let bs = buf.len() / meta.len().max(1);
    // Each block's records, parsed once for all the tests below (each
    // walked the block itself: four walks, a tenth of the run's CPU on
    // the 2M-file image); one list reused from block to block.
    let mut records: Vec<DirEntry<'_>> = Vec::new();
    buf.chunks(bs.max(1))
        .zip(meta)
        .zip(blocks)
        .map(|((block, m), b)| {
            records.clear();
            let mut broken = false;
            for e in DirBlockIter::new(block) {
                match e {
                    Ok(e) => records.push(e),
                    Err(_) => {
                        broken = true;
                        break;
                    }
                }
            }
            let tails = rules.csum;
            let csum = rules.csum.then(|| {
                // A chain that parses to its end needs no second walk.
                let tail = if broken {
                    crate::salvage::has_tail(block, num::sat_u32(bs))
                } else {
                    let end = records.last().map_or(0, |e| e.offset + e.rec_len as usize);
                    crate::salvage::has_tail_parsed(block, end)
                };
                (
                    tail,
                    tail && verify_dir_block_checksum(m.seed, block).is_ok(),
                )
            });
            let range = (m.hashed && !is_dx_node(block, tails)).then(|| {
                let (lo, hi) = htree::leaf_range(&records, v0, hseed);
                (lo, hi, v0)
            });
            let names = records.iter().filter(|e| e.inode.0 != 0).map(|e| e.name);
            let unique = !may_repeat(names);
            let mut pre = Pre {
                csum,
                range,
                unique,
                clean: None,
            };
            pre.clean = rules.clean(m, b, block, &records, broken, &pre);
            pre
        })
        .collect()
}

fn dir_block(c: &mut Ctx, dx: &mut htree::DxDirs, b: &DirBlock, block: &[u8], pre: Option<&Pre>) {
    let leaf_csum = pre.and_then(|p| p.csum);
    let ino = b.ino;
    let Some(d) = c.dir_idx(ino) else { return };
    let htree = c.dirs()[d].htree();
    let hashed = htree && !c.dirs()[d].encrypted() && !c.dirs()[d].casefold();
    let seed = c.dirs()[d].seed(c.sb().csum_seed());
    let owner = c.dirs()[d].owner();
    // An htree root: "." and ".." then index data.
    // The root's '.' and '..' are records like any (the index lives in
    // the slack of '..'): damaged ones are salvaged as in a linear block.
    let dots_ok = || DirBlockIter::new(block).take(2).all(|e| e.is_ok());
    if htree && b.lblk == 0 && dots_ok() {
        if let Ok(root) = parse_dx_root(block) {
            if c.csum() && verify_dx_checksum(seed, block).is_err() {
                c.report(Subject::Inode(ino)).error_fix(
                    2,
                    ProblemCode::PR_2_HTREE_ROOT_CSUM_INVALID,
                    format!("Problem in HTREE directory inode {ino}: root node fails checksum."),
                    crate::fix::Fix::ClearIndexFlag(ino),
                );
            }
            if hashed {
                htree::note_root(c, dx, ino, &root);
            }
            // The two records as stored, names and file types (e2fsck's
            // check_dot/check_dotdot judge them as in any block).
            for (slot, e) in DirBlockIter::new(block).take(2).flatten().enumerate() {
                entry(c, d, slot, b, e.name, e.inode.0, e.file_type, e.offset);
            }
            return;
        }
        // An index with no entries, which the format's parser refuses: pass
        // 1 found the rest of the root sound, so e2fsck walks it as it is
        // and finds every other block unreferenced.
        // dx_root_info at 24: hash version 28, info length 29, depth 30;
        // count after limit, past the info.
        let info = block.get(28..31).unwrap_or(&[0, 0, 0]);
        let count_at = 24 + usize::from(info[1]) + 2;
        if hashed && block.get(count_at..count_at + 2) == Some(&[0, 0][..]) {
            htree::note_empty_root(c, dx, ino, info[0], info[2]);
            for (slot, e) in DirBlockIter::new(block).take(2).flatten().enumerate() {
                entry(c, d, slot, b, e.name, e.inode.0, e.file_type, e.offset);
            }
            return;
        }
    }
    // An interior htree node looks like one empty record over the block.
    if htree && b.lblk > 0 && is_dx_node(block, c.csum()) {
        if hashed && !htree::note_node(dx, ino, b.lblk, block) {
            c.report(Subject::InodeAt(ino, b.lblk)).error_fix(
                2,
                ProblemCode::PR_2_HTREE_BADBLK,
                format!(
                    "Problem in HTREE directory inode {ino}: block #{} is corrupt",
                    { b.lblk }
                ),
                crate::fix::Fix::ClearIndexFlag(ino),
            );
        }
        if c.csum() && verify_dx_checksum(seed, block).is_err() {
            c.report(Subject::Inode(ino)).error_fix(
                2,
                ProblemCode::PR_2_HTREE_NODE_CSUM_INVALID,
                format!("Problem in HTREE directory inode {ino}: internal node fails checksum."),
                crate::fix::Fix::ClearIndexFlag(ino),
            );
        }
        return;
    }
    // e2fsck's failed_csum: a leaf whose checksum fails is said to once
    // its entries have been checked (see `only_csum`).
    let mut failed_csum = false;
    if c.csum() {
        let (tail, ok) = leaf_csum.unwrap_or_else(|| {
            let t = crate::salvage::has_tail(block, c.geo().block_size);
            (t, t && verify_dir_block_checksum(seed, block).is_ok())
        });
        if !tail {
            c.report(Subject::InodeAt(ino, b.lblk)).error_fix(
                2,
                ProblemCode::PR_2_LEAF_NODE_MISSING_CSUM,
                format!(
                    "Directory inode {ino}, block #{}, offset 0: directory has no checksum.",
                    { b.lblk }
                ),
                crate::fix::Fix::DirAddTail(b.phys, owner),
            );
            // e2fsck rebuilds such a directory in pass 3A.
            if c.repairing() {
                c.rehash(ino);
            }
            // Declined, the block still fails its checksum.
            failed_csum = !c.repairing();
        } else if !ok {
            failed_csum = true;
        }
    }
    let before = c.problems().mark();
    if entries(c, dx, d, b, block, pre, hashed) && failed_csum && !mended(c, before, b.phys) {
        // PR_2_LEAF_NODE_ONLY_CSUM_INVALID, after the entries (in e2fsck
        // only for a block they left as it was; a repair here rewrites
        // the checksum either way).
        c.report(Subject::InodeAt(ino, b.lblk)).error_fix(
            2,
            ProblemCode::PR_2_LEAF_NODE_ONLY_CSUM_INVALID,
            format!(
                "Directory inode {ino}, block #{}: directory passes checks but fails checksum.",
                { b.lblk }
            ),
            crate::fix::Fix::DirBlockChecksum(b.phys, owner),
        );
    }
}

/// Whether a repair of the problems said since `mark` changes entries of
/// block `phys`: e2fsck writes such a block (its checksum made anew) and
/// asks about a checksum that fails only of a block it left as it was.
fn mended(c: &Ctx, mark: usize, phys: u64) -> bool {
    c.repairing()
        && c.problems().list().get(mark..).is_some_and(|said| {
            said.iter()
                .any(|p| p.fix.as_ref().is_some_and(|f| f.mends_dir_block(phys)))
        })
}

/// The entries of directory block `b` (of directory `c.dirs()[d]`); false
/// when the block could not be read as one (and the rest is skipped).
fn entries(
    c: &mut Ctx,
    dx: &mut htree::DxDirs,
    d: usize,
    b: &DirBlock,
    block: &[u8],
    pre: Option<&Pre>,
    hashed: bool,
) -> bool {
    let ino = b.ino;
    let start = c.problems().mark();
    let mut salvages = Vec::new();
    let Some(salvaged) = salvage_block(c, d, b, block, &mut salvages) else {
        return false;
    };
    // e2fsck salvages a record when its walk of the block meets it, and
    // checks the entries before it first: each salvage (with what was
    // said before it) waits for the first entry at or past its offset.
    // The fixes keep a valid order so: a salvage changes the block only
    // from its offset on (or the length of the record before it).
    let mut waiting = salvages_waiting(c, start, &salvages);
    let mut flush = |c: &mut Ctx, upto: usize| {
        while waiting.front().is_some_and(|w| w.0 <= upto) {
            if let Some((_, chunk)) = waiting.pop_front() {
                let end = c.problems().mark();
                c.reorder_problems().insert_at(end, chunk);
            }
        }
    };
    // Names repeated in the block are looked for unless the reader found
    // they cannot be (in the block as read: not a salvaged copy).
    let dups_possible = salvaged.is_some() || !pre.is_some_and(|p| p.unique);
    let block: &[u8] = salvaged.as_deref().unwrap_or(block);
    let mut names: Vec<(&[u8], usize, u32)> = Vec::new();
    let mut leaf_names: Vec<&[u8]> = Vec::new();
    let encrypted = c.dirs()[d].encrypted();
    for (pos, e) in DirBlockIter::new(block).enumerate() {
        // A block that still does not parse was reported above.
        let Ok(e) = e else { break };
        flush(c, e.offset);
        let slot = if b.lblk == 0 { pos } else { 2 + pos };
        let name = e.name;
        // A '.' or '..' past the first two is cleared in a repair
        // (PR_2_DUP_DOT, PR_2_DUP_DOT_DOT, in `entry`): e2fsck goes on
        // to the next entry then, and its name is no repeat. Left in
        // place (-n), it is one as any other name is.
        let dot_cleared = slot > 1 && (name == b"." || name == b"..") && c.repairing();
        if e.inode.0 != 0 && dups_possible && !dot_cleared {
            names.push((name, e.offset, e.inode.0));
        }
        if e.inode.0 != 0 && slot > 1 {
            if hashed {
                leaf_names.push(e.name);
            }
            if encrypted && e.name.len() < 16 && encrypted_too_short(c, d, b, e.name, e.offset) {
                continue;
            }
        }
        if slot < 2 {
            dot_record(c, d, b, block, slot, &e);
        }
        entry(c, d, slot, b, name, e.inode.0, e.file_type, e.offset);
    }
    flush(c, usize::MAX);
    if hashed && b.lblk > 0 {
        htree::note_leaf(
            c,
            dx,
            ino,
            b.lblk,
            || leaf_names.clone(),
            pre.and_then(|p| p.range),
        );
    }
    repeated_names(c, b, names);
    true
}

/// Names repeated within the block, found by sorting them: said once
/// per directory and left to pass 3A, which looks for repeats over the
/// whole directory (e2fsck's PR_2_REPORT_DUP_DIRENT, then its rehash's
/// duplicate search). A '.' or '..' repeated is one of them when the
/// entry was left in place (-n); a repair has cleared it. A directory
/// already to be rebuilt is not looked at (e2fsck's `dups_found`).
/// `names` are (name, offset, inode).
fn repeated_names(c: &mut Ctx, b: &DirBlock, mut names: Vec<(&[u8], usize, u32)>) {
    let ino = b.ino;
    names.sort_unstable();
    let scheduled = c.rehashes(ino);
    // The repeat e2fsck meets first walking the block: the lowest offset
    // of a name seen before it.
    let mut first_repeat: Option<(usize, &[u8])> = None;
    for w in names.windows(2) {
        if w[0].0 != w[1].0 {
            continue;
        }
        if !scheduled && first_repeat.is_none_or(|(at, _)| w[1].1 < at) {
            first_repeat = Some((w[1].1, w[1].0));
        }
    }
    if let Some((_, name)) = first_repeat {
        let path = crate::pathname::dir_path(c.fs(), ino);
        c.report(Subject::Inode(ino)).harmless(
            2,
            ProblemCode::PR_2_REPORT_DUP_DIRENT,
            format!(
                "Duplicate entry '{}' found.\n\tMarking {path} ({ino}) to be rebuilt.",
                crate::pathname::safe(name),
            ),
        );
        c.rehash(ino);
    }
}

/// The salvages of a block (their offsets, and the mark up to which
/// what was said belongs to each) with what was said before each: e2fsck
/// salvages a record when its walk of the block meets it, and checks the
/// entries before it first, so each salvage's words wait for the first
/// entry at or past its offset.
fn salvages_waiting(
    c: &mut Ctx,
    start: usize,
    salvages: &[(usize, usize)],
) -> std::collections::VecDeque<(usize, Vec<crate::problem::Problem>)> {
    let mut waiting: std::collections::VecDeque<(usize, Vec<crate::problem::Problem>)> =
        Default::default();
    if !salvages.is_empty() {
        let end = c.problems().mark();
        let mut said = c.reorder_problems().take_range(start..end).into_iter();
        let mut taken = start;
        for &(at, end) in salvages {
            let chunk: Vec<crate::problem::Problem> = said.by_ref().take(end - taken).collect();
            taken = end;
            waiting.push_back((at, chunk));
        }
        if let Some(last) = waiting.back_mut() {
            last.1.extend(said);
        }
    }
    waiting
}

/// An entry of an encrypted directory whose name is too short
/// (PR_2_BAD_ENCRYPTED_NAME: "Encrypted @E is too short."); true when
/// the entry is not to be looked at more: as e2fsck, the entry is
/// cleared, and declined (-n), it is checked on like any other.
fn encrypted_too_short(c: &mut Ctx, d: usize, b: &DirBlock, name: &[u8], offset: usize) -> bool {
    let ino = b.ino;
    let msg = format!(
        "Encrypted entry '{}' in {} ({ino}) is too short.",
        crate::pathname::safe(name),
        crate::pathname::dir_path(c.fs(), ino)
    );
    bad_entry(c, d, b, offset, ProblemCode::PR_2_BAD_ENCRYPTED_NAME, msg);
    c.repairing()
}

/// The record of '.' or '..' (`slot` 0 or 1) as such: the byte after its
/// name zero (e2fsck's NULL termination check), and a '.' holding the
/// block's free space split.
fn dot_record(c: &mut Ctx, d: usize, b: &DirBlock, block: &[u8], slot: usize, e: &DirEntry<'_>) {
    let ino = b.ino;
    let owner = c.dirs()[d].owner();
    let name = e.name;
    if e.inode.0 != 0 && b.phys != 0 && (name == b"." || name == b"..") {
        let at = e.offset + 8 + name.len();
        if block.get(at).is_some_and(|&x| x != 0) {
            c.report(b.entry_at(e.offset)).error_fix(
                2,
                if name == b"." {
                    ProblemCode::PR_2_DOT_NULL_TERM
                } else {
                    ProblemCode::PR_2_DOT_DOT_NULL_TERM
                },
                format!(
                    "'{}' directory entry in directory inode {ino} is not NULL terminated",
                    String::from_utf8_lossy(name)
                ),
                crate::fix::Fix::DirZeroByte(b.phys, at, owner),
            );
        }
    }
    if slot == 0 && name == b"." && e.rec_len > 24 {
        // A '.' holding the block's free space: split, as e2fsck does
        // (its PR_NO_OK: not an error).
        c.report(b.entry_at(e.offset)).harmless_fix(
            2,
            ProblemCode::PR_2_SPLIT_DOT,
            format!("Directory entry for '.' in ... ({ino}) is big."),
            crate::fix::Fix::DirMakeDot(b.phys, ino, owner),
        );
    }
}

/// Whether a name has a `/` or a NUL, looked for eight bytes at a time
/// (two `contains`, then one look at each byte, were a third of
/// [`Rules::clean`]'s own time).
fn slash_or_nul(name: &[u8]) -> bool {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    const SLASH: u64 = LO * b'/' as u64;
    // Exact for "some byte is 0": a borrow only runs past a zero byte.
    let zero_in = |w: u64| w.wrapping_sub(LO) & !w & HI != 0;
    let hit = |w: u64| zero_in(w) || zero_in(w ^ SLASH);
    let word = |b: &[u8]| {
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        u64::from_le_bytes(a)
    };
    let half = |b: &[u8]| u64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    let n = name.len();
    match n {
        0..=3 => name.iter().any(|&x| x == b'/' || x == 0),
        // Two loads that may overlap: a byte looked at twice is harmless.
        4..=7 => hit(half(name) | half(&name[n - 4..]) << 32),
        _ => name.chunks_exact(8).any(|w| hit(word(w))) || hit(word(&name[n - 8..])),
    }
}

/// Whether two of the names may be the same: false when their 64-bit
/// hashes all differ (nearly always), found through a small open-address
/// table (sorting the names by memcmp was 8% of the checking thread on
/// the 2M-file image).
fn may_repeat<'a>(names: impl Iterator<Item = &'a [u8]>) -> bool {
    const SLOTS: usize = 1024;
    // Twice as many slots as names, when their number is known: clearing
    // all 8 KiB for a block of a hundred names was half of the work.
    let slots = names
        .size_hint()
        .1
        .map_or(SLOTS, |n| (2 * n).next_power_of_two().clamp(16, SLOTS));
    let shift = 64 - slots.trailing_zeros();
    let mut table = vec![0u64; slots];
    // Past half full, the rest are sorted with the table's.
    let mut more: Vec<u64> = Vec::new();
    let mut n = 0;
    for name in names {
        // 0 marks a free slot (a hash differing in bit 0 only then
        // matches: a false alarm, sorted out by the caller).
        let h = name_hash(name) | 1;
        n += 1;
        if n > slots / 2 {
            more.push(h);
            continue;
        }
        let mut i = num::index(h >> shift);
        loop {
            if table[i] == 0 {
                table[i] = h;
                break;
            }
            if table[i] == h {
                return true;
            }
            i = (i + 1) % slots;
        }
    }
    if more.is_empty() {
        return false;
    }
    more.extend(table.iter().copied().filter(|&h| h != 0));
    more.sort_unstable();
    more.windows(2).any(|w| w[0] == w[1])
}

/// A fast 64-bit hash of a name (FxHash's step over 8-byte words, the
/// length mixed in): only ever compared, so any collision is harmless.
fn name_hash(name: &[u8]) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let step = |h: u64, w: u64| (h.rotate_left(5) ^ w).wrapping_mul(K);
    let mut h = step(0, name.len() as u64);
    let mut words = name.chunks_exact(8);
    for w in &mut words {
        let mut b = [0u8; 8];
        b.copy_from_slice(w);
        h = step(h, u64::from_le_bytes(b));
    }
    // The last 1 to 7 bytes in two loads that may overlap (the length is
    // mixed in, so equal words still mean equal bytes): copying them into
    // a zeroed word took a call to memcpy and a stalled load, most of
    // `may_repeat`'s time.
    let rest = words.remainder();
    let n = rest.len();
    let w = match n {
        0 => None,
        1..=3 => {
            Some(u64::from(rest[0]) | u64::from(rest[n / 2]) << 8 | u64::from(rest[n - 1]) << 16)
        }
        _ => {
            let lo = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]);
            let hi = u32::from_le_bytes([rest[n - 4], rest[n - 3], rest[n - 2], rest[n - 1]]);
            Some(u64::from(lo) | u64::from(hi) << 32)
        }
    };
    if let Some(w) = w {
        h = step(h, w);
    }
    h
}

/// e2fsck's `mutate_name`: a name made unique by a `~N` suffix, kept
/// within the record's rounded length (its last letters give way).
pub(crate) fn mutate_name(s: &mut Vec<u8>) {
    let l = s.len();
    if l == 0 {
        return;
    }
    let mut i = l - 1;
    while i > 0 && s[i].is_ascii_digit() {
        i -= 1;
    }
    if i == l - 1 || s[i] != b'~' {
        let n = if (l - 1) & 3 < 2 { l + 2 } else { (l + 3) & !3 }.min(255);
        s.resize(n, 0);
        s[n - 2] = b'~';
        s[n - 1] = b'0';
        return;
    }
    for i in (0..l).rev() {
        if s[i].is_ascii_digit() {
            if s[i] == b'9' {
                s[i] = b'0';
                continue;
            }
            s[i] += 1;
            return;
        }
        if i == 1 {
            match s[0] {
                b'z' => s[0] = b'A',
                b'Z' => {
                    s[0] = b'~';
                    s[1] = b'0';
                }
                _ => s[0] = s[0].wrapping_add(1),
            }
        } else if i > 0 {
            s[i] = b'1';
            s[i - 1] = b'~';
        } else if s[0] == b'~' {
            s[0] = b'a';
        } else {
            s[0] = s[0].wrapping_add(1);
        }
        break;
    }
}

/// Finds the records of a leaf block that do not parse and reports each
/// with its salvage (e2fsck's `salvage_directory`). A read-only check
/// stops at the first, as e2fsck -n does; a repair salvages a copy as the
/// writer will (the fixes are replayed in this order) and goes on, so that
/// the entries after the damage are seen and counted this round, as
/// e2fsck goes on after its salvage (pass 4 would otherwise move what they
/// name to lost+found). Returns the salvaged copy (None: the block reads
/// as it is), or None at all when checking the block stops here.
fn salvage_block(
    c: &mut Ctx,
    d: usize,
    b: &DirBlock,
    block: &[u8],
    salvages: &mut Vec<(usize, usize)>,
) -> Option<Option<Vec<u8>>> {
    let ino = b.ino;
    let bs = c.geo().block_size;
    let owner = c.dirs()[d].owner();
    let max_ino = c.sb().s_inodes_count.get();
    let mut copy: Option<Vec<u8>> = None;
    let mut made_dot = false;
    // Each salvage mends at least one record; a block holds at most
    // bs / 8 of them.
    for _ in 0..bs / 8 {
        let cur: &[u8] = copy.as_deref().unwrap_or(block);
        let mut prev_off = None;
        let mut bad = None;
        for e in DirBlockIter::new(cur) {
            match e {
                Ok(e) => prev_off = Some(e.offset),
                Err(err) => {
                    bad = Some(err.offset);
                    break;
                }
            }
        }
        let Some(bad_at) = bad else {
            // A block 0 whose first record is no '.' (a salvage emptied
            // it) gets one, split off as the writer will make it, so that
            // what follows is read as it will be (e2fsck goes on after
            // check_dot the same way).
            let dot_ok = DirBlockIter::new(cur)
                .next()
                .and_then(Result::ok)
                .is_some_and(|e| e.name == b"." && e.inode.0 != 0);
            if c.repairing() && b.lblk == 0 && dot_ok {
                // A '.' over the records after it is split (e2fsck's
                // PR_NO_OK, reported without counting); when a '..'
                // follows, e2fsck's check_dot leaves it and goes on to
                // read it and what follows in the same pass: read them
                // here too, or pass 3 would reconnect what they name.
                if let Some(v) = crate::dot::split_view(cur, bs) {
                    c.report(b.entry_at(0)).harmless_fix(
                        2,
                        ProblemCode::PR_2_SPLIT_DOT,
                        format!("Directory entry for '.' in ... ({ino}) is big."),
                        crate::fix::Fix::DirMakeDot(b.phys, ino, owner),
                    );
                    return Some(Some(v));
                }
            }
            if !c.repairing() || b.lblk != 0 || dot_ok || made_dot {
                return Some(copy);
            }
            let mut next = cur.to_vec();
            let ft = if c.sb().has_incompat(Incompat::FILETYPE) {
                ft::DIR
            } else {
                0
            };
            let first_ino = cur
                .get(..4)
                .map_or(0, |x| u32::from_le_bytes([x[0], x[1], x[2], x[3]]));
            crate::dot::make_dot(&mut next, ino, ft, bs);
            let (code, msg) = if first_ino == 0 {
                (
                    ProblemCode::PR_2_MISSING_DOT,
                    format!("Missing '.' in directory inode {ino}."),
                )
            } else {
                (
                    ProblemCode::PR_2_1ST_NOT_DOT,
                    format!("First entry in directory inode {ino} should be '.'"),
                )
            };
            c.report(b.entry_at(0)).error_fix(
                2,
                code,
                msg,
                crate::fix::Fix::DirMakeDot(b.phys, ino, owner),
            );
            made_dot = true;
            copy = Some(next);
            continue;
        };
        // Bytes that look like a tail but that the records run into are
        // no tail (e2fsck's test): the damage is where the records, read
        // to the block's end, go wrong.
        let false_tail =
            c.csum() && DirEntryTail::find(cur).is_some() && !crate::salvage::has_tail(cur, bs);
        let (at, prev) = if false_tail {
            crate::salvage::first_bad(cur, bs).unwrap_or((bad_at, prev_off))
        } else {
            (bad_at, prev_off)
        };
        let msg = format!(
            "Directory inode {ino}, block #{}, offset {at}: directory corrupted",
            { b.lblk }
        );
        let before = c.problems().mark();
        c.report(b.entry_at(at)).error_fix(
            2,
            ProblemCode::PR_2_DIR_CORRUPTED,
            msg,
            crate::fix::Fix::DirSalvage(b.phys, at, prev, owner),
        );
        if c.problems().mark() > before {
            salvages.push((at, c.problems().mark()));
        }
        if !c.repairing() {
            unsalvaged(c);
            return None;
        }
        let mut next = cur.to_vec();
        // As the writer sees the block: only metadata_csum blocks end in a
        // tail.
        let end = if c.csum() && crate::salvage::has_tail(&next, bs) {
            next.len() - 12
        } else {
            next.len()
        };
        crate::salvage::salvage(&mut next, at, prev, end, bs, max_ino);
        if next == cur {
            return None;
        }
        copy = Some(next);
    }
    None
}

/// A corrupted directory block `-n` may not salvage: e2fsck's check stops
/// there ("e2fsck: aborted", exit 12), as its check_dir_block does when
/// the salvage is declined.
fn unsalvaged(c: &mut Ctx) {
    c.fail("aborted");
}

/// An interior node: one empty record over the block and, as e2fsck
/// tells it from an empty leaf, the limit an interior node has.
fn is_dx_node(block: &[u8], csum: bool) -> bool {
    let limit = ext4r_format::htree::dx_limit(block.len(), 8, csum);
    block.len() >= 12
        && block[8..10] == limit.to_le_bytes()
        && block[..4] == [0; 4]
        && ext4r_format::dir::rec_len_from_disk(
            u16::from_le_bytes([block[4], block[5]]),
            num::sat_u32(block.len()),
        ) as usize
            == block.len()
        && block[6] == 0
}

/// Which part of the inline directories [`inline_dirs`] reads. e2fsck
/// lists an inline directory's `i_block` records as its block #0 and
/// those in its `system.data` value as its block #1, both at block number
/// 0, and reads them in its order of blocks (see [`blocks_in_order`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum InlinePart {
    /// `.`, `..` and the records in `i_block` (e2fsck's block #0).
    First,
    /// The records in the `system.data` value (its block #1).
    Second,
    /// Both, directory by directory.
    Both,
}

/// Inline directories, read record by record (see [`crate::inline_dir`]),
/// in inode order.
fn inline_dirs(c: &mut Ctx, part: InlinePart) {
    let inl: Vec<usize> = (0..c.dirs().len())
        .filter(|&d| c.dirs()[d].inline())
        .collect();
    for d in inl {
        if c.stopping() {
            return;
        }
        if part != InlinePart::Second {
            inline_first(c, d);
        }
        if c.stopping() {
            return;
        }
        if part != InlinePart::First {
            inline_second(c, d);
        }
    }
}

/// An inline directory's `.`, `..` and the records in its `i_block`.
fn inline_first(c: &mut Ctx, d: usize) {
    use crate::inline_dir::{AREA_IBLOCK, AREA_PARENT};
    let ino = c.dirs()[d].ino;
    let Ok(mut rec) = c.fs().inode_record(InodeNr(ino)) else {
        return;
    };
    let parent = rec
        .get(0x28..0x2c)
        .map_or(0, |x| u32::from_le_bytes([x[0], x[1], x[2], x[3]]));
    let at = DirBlock {
        phys: 0,
        ino,
        lblk: AREA_PARENT,
    };
    // '.' is implied, and counts as a link like a stored one.
    entry(c, d, 0, &at, b".", ino, ft::DIR, 0);
    entry(c, d, 1, &at, b"..", parent, ft::DIR, 0);
    inline_size(c, ino, &rec);
    inline_area(c, d, &mut rec, AREA_IBLOCK);
}

/// The records in an inline directory's `system.data` value. Its size is
/// judged again, as e2fsck does for each of its blocks: a read-only check
/// says it twice; a value a repair resizes is read in the next round, as
/// it will be (e2fsck reads it after its fix).
fn inline_second(c: &mut Ctx, d: usize) {
    let ino = c.dirs()[d].ino;
    let Ok(mut rec) = c.fs().inode_record(InodeNr(ino)) else {
        return;
    };
    if c.repairing() && inline_bad_size(&rec).is_some() {
        return;
    }
    inline_size(c, ino, &rec);
    inline_area(c, d, &mut rec, crate::inline_dir::AREA_DATA);
}

/// The records of one area of an inline directory (its entries from slot
/// 2 on: `.` and `..` are not records there).
fn inline_area(c: &mut Ctx, d: usize, rec: &mut [u8], area: u64) {
    use crate::inline_dir::{records, AREA_IBLOCK};
    let ino = c.dirs()[d].ino;
    let Some(bytes) = crate::inline_dir::area_mut(rec, area) else {
        return;
    };
    let mut bytes = bytes.to_vec();
    // In a repair each salvage is made on a copy too and the area read
    // again, as the writer will leave it, so that the records after a
    // damaged one are seen in this round (e2fsck goes on after its salvage
    // the same way; otherwise pass 3 reconnects what they name). Each
    // salvage mends at least one record.
    let max_ino = c.sb().s_inodes_count.get();
    for _ in 0..bytes.len() / 8 + 1 {
        let Some((off, prev)) = records(&bytes).1 else {
            break;
        };
        // As e2fsck reads inline data: the i_block part is block #0, its
        // records after the 4-byte parent; the part in the xattr is block
        // #1.
        let (blk, at) = if area == AREA_IBLOCK {
            (0, off + 4)
        } else {
            (1, off)
        };
        c.report(Subject::Entry {
            dir: ino,
            lblk: blk,
            offset: u32::try_from(at).unwrap_or(u32::MAX),
        })
        .error_fix(
            2,
            ProblemCode::PR_2_DIR_CORRUPTED,
            format!("Directory inode {ino}, block #{blk}, offset {at}: directory corrupted"),
            crate::fix::Fix::InlineSalvage(ino, area, off, prev),
        );
        if !c.repairing() {
            // Declined, e2fsck stops there.
            unsalvaged(c);
            return;
        }
        let end = bytes.len();
        crate::salvage::salvage(&mut bytes, off, prev, end, 4096, max_ino);
    }
    let at = DirBlock {
        phys: 0,
        ino,
        lblk: area,
    };
    let (recs, _) = records(&bytes);
    for (slot, r) in (2..).zip(recs.iter().filter(|r| r.inode != 0)) {
        entry(c, d, slot, &at, r.name, r.inode, r.file_type, r.offset);
    }
}

/// Indexed block-mapped directories whose illegal pointers past their
/// last block pass 1 clears in this repair. e2fsck keeps such a block in
/// its list as unallocated (logical blocks from the first past the end up
/// to the last illegal one), and pass 2, taking unallocated blocks first,
/// gives each a new empty block; the first is past what the index was
/// found to cover (PR_2_UNEXPECTED_HTREE_BLOCK): the index is cleared and
/// the directory rebuilt. Only direct blocks are given a new one here.
fn htree_tails(c: &mut Ctx) {
    for (ino, end, illegal_end) in c.take_htree_tails() {
        let Some(d) = c.dir_idx(ino) else { continue };
        if !c.dirs()[d].htree() {
            continue;
        }
        let owner = c.dirs()[d].owner();
        for l in end..illegal_end {
            let msg = format!("Directory inode {ino} has an unallocated block #{l}.");
            let block = if l < 12 {
                crate::lost_found::reserve_block(c)
            } else {
                None
            };
            match block {
                Some(b) => c.report(Subject::InodeAt(ino, l)).error_fix(
                    2,
                    ProblemCode::PR_2_DIRECTORY_HOLE,
                    msg,
                    crate::fix::Fix::DirBlockAt(ino, l, b, owner),
                ),
                None => c.report(Subject::InodeAt(ino, l)).error(
                    2,
                    ProblemCode::PR_2_DIRECTORY_HOLE,
                    msg,
                ),
            }
            if l == end {
                let path = crate::pathname::dir_path(c.fs(), ino);
                c.report(Subject::Inode(ino)).error_fix(
                    2,
                    ProblemCode::PR_2_UNEXPECTED_HTREE_BLOCK,
                    format!("Unexpected block in HTREE directory inode {ino} ({path})."),
                    crate::fix::Fix::ClearIndexFlag(ino),
                );
                // Read as the linear directory it becomes.
                c.dir_mut(d).clear_htree();
            }
        }
    }
}

/// e2fsck's PR_2_BAD_INLINE_DIR_SIZE: the inline size (60 bytes of
/// `i_block` and the `system.data` value) a multiple of 4 with room for a
/// record past `i_block`. e2fsck judges it for each of the two "blocks"
/// of an inline directory: [`inline_first`] and [`inline_second`] each
/// call this (a repair fixes it at the first).
fn inline_size(c: &mut Ctx, ino: u32, rec: &[u8]) {
    let Some((size, new)) = inline_bad_size(rec) else {
        return;
    };
    let msg = format!("Inline directory inode {ino} size ({size}) must be a multiple of 4.");
    c.report(Subject::Inode(ino)).error_fix(
        2,
        ProblemCode::PR_2_BAD_INLINE_DIR_SIZE,
        msg,
        crate::fix::Fix::InlineDirSize(ino, new),
    );
}

/// The inline size of inode record `rec` and the size it is to have,
/// when it is not a valid one (see [`inline_size`]).
fn inline_bad_size(rec: &[u8]) -> Option<(usize, usize)> {
    let (_, len) = crate::inline_dir::data_range(rec)?;
    let size = 60 + len;
    crate::inline_dir::bad_size(size).map(|new| (size, new))
}

#[cfg(test)]
mod tests {
    use super::{batches, may_repeat, mutate_name, name_hash, slash_or_nul};

    #[test]
    fn short_runs_go_in_batches_and_a_long_one_alone() {
        // Runs of 1, 1, 3, 2, 10 and 1 blocks, batches of up to 4.
        let runs = [(0, 1), (1, 2), (2, 5), (5, 7), (7, 17), (17, 18)];
        assert_eq!(batches(&runs, 4), [(0, 2), (2, 3), (3, 4), (4, 5), (5, 6)]);
        assert_eq!(batches(&runs, 5), [(0, 3), (3, 4), (4, 5), (5, 6)]);
        assert_eq!(
            batches(&runs, 1),
            [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 6)]
        );
        assert_eq!(batches(&runs, 100), [(0, 6)]);
        assert!(batches(&[], 8).is_empty());
    }

    #[test]
    fn slashes_and_nuls_are_found_anywhere() {
        for (len, fill) in (0..=20).flat_map(|l| [b'a', 1, 0x2e, 0x30, 0x80, 0xff].map(|f| (l, f)))
        {
            let plain = vec![fill; len];
            assert!(!slash_or_nul(&plain), "{len} {fill}");
            // Bytes next to '/' and 0 too (a borrow through 0x01, 0x2e).
            for odd in [0u8, b'/', 1, 0x2e, 0x30, 0x80, 0xff] {
                for at in 0..len {
                    let mut name = plain.clone();
                    name[at] = odd;
                    let expect = odd == 0 || odd == b'/';
                    assert_eq!(slash_or_nul(&name), expect, "{len} {fill} {at} {odd}");
                    // Next to a neighbour that could carry a borrow.
                    if at + 1 < len {
                        name[at + 1] = 1;
                        assert_eq!(slash_or_nul(&name), expect, "{len} {fill} {at} {odd} 1");
                    }
                }
            }
        }
    }

    #[test]
    fn names_one_byte_apart_hash_apart() {
        // Each step of the hash is one-to-one in its word, so names of a
        // length that differ in one byte must differ in hash: every byte
        // of a short tail has to reach a word.
        for len in 1..=17 {
            let base = vec![b'a'; len];
            let h = name_hash(&base);
            assert_eq!(h, name_hash(&base.clone()));
            for at in 0..len {
                let mut other = base.clone();
                other[at] = b'b';
                assert_ne!(h, name_hash(&other), "{len} {at}");
            }
        }
    }

    #[test]
    fn repeated_names_are_never_missed() {
        for n in [0usize, 1, 2, 300, 512, 513, 2000] {
            let names: Vec<Vec<u8>> = (0..n).map(|i| format!("f{i:06}").into_bytes()).collect();
            assert!(!may_repeat(names.iter().map(|v| v.as_slice())), "{n}");
            if n > 0 {
                // The first name again, at the end.
                let again = names.iter().chain(names.first()).map(|v| v.as_slice());
                assert!(may_repeat(again), "{n}");
            }
        }
    }

    fn m(s: &str) -> String {
        let mut v = s.as_bytes().to_vec();
        mutate_name(&mut v);
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn names_mutate_as_e2fsck() {
        assert_eq!(m("foobar"), "foobar~0");
        assert_eq!(m("foo"), "fo~0");
        assert_eq!(m("abcdefgh"), "abcdef~0");
        assert_eq!(m("a"), "a~0");
        assert_eq!(m("foobar~0"), "foobar~1");
        assert_eq!(m("fooba~9"), "foob~10");
        assert_eq!(m("x~99"), "y~00");
    }
}
