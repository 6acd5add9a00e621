//! Htree checks for pass 2, done without a second read: while blocks go
//! by in disk order the index blocks are recorded and each leaf's lowest
//! and highest name hash is noted; afterwards the index is walked from
//! the root and every leaf's hashes are checked against the range its
//! parent entry gives it, as e2fsck's pass 2 does.

use crate::codes::ProblemCode;
use crate::problem::Subject;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use ext4r_format::dir::DirEntry;
use ext4r_format::htree::{
    dx_hash, dx_hash4, effective_hash_version, parse_dx_node, DxHash, DxRootBlock,
};
use ext4r_format::superblock::FLAGS_UNSIGNED_HASH;

use crate::ctx::Ctx;

/// Index entries as (hash, logical block).
type Entries = Vec<(u32, u32)>;

/// What pass 2 gathers about one htree directory.
#[derive(Debug, Default)]
pub(crate) struct DxDir {
    /// Root entries (hash, logical block) and the tree depth, once seen.
    root: Option<(Entries, u8, u8)>,
    /// Interior nodes by logical block.
    nodes: BTreeMap<u32, Entries>,
    /// Leaves by logical block: (min hash, max hash, hash version used),
    /// sorted. A list where a map's node took 200 bytes for the handful
    /// of leaves most directories have (2,000 directories: 380 KiB).
    leaves: Vec<(u32, (u32, u32, u8))>,
}

impl DxDir {
    fn leaf(&self, lblk: u32) -> Option<&(u32, u32, u8)> {
        let i = self.leaves.binary_search_by_key(&lblk, |l| l.0).ok()?;
        Some(&self.leaves[i].1)
    }

    /// Records a leaf (again: the last record of a block stands).
    fn note_leaf(&mut self, lblk: u32, range: (u32, u32, u8)) {
        match self.leaves.last() {
            // Blocks come in disk order, mostly the logical order too.
            Some(l) if l.0 >= lblk => match self.leaves.binary_search_by_key(&lblk, |l| l.0) {
                Ok(i) => self.leaves[i].1 = range,
                Err(i) => self.leaves.insert(i, (lblk, range)),
            },
            _ => self.leaves.push((lblk, range)),
        }
    }
}

/// Per-directory htree records, keyed by inode: walked in inode order, as
/// e2fsck does, so that the report does not vary from run to run. A list
/// in the order first seen with an index, where a map of the records
/// themselves took 260 KiB for 2,000 directories.
#[derive(Debug, Default)]
pub(crate) struct DxDirs {
    slot: HashMap<u32, u32>,
    dirs: Vec<(u32, DxDir)>,
}

impl DxDirs {
    fn entry(&mut self, ino: u32) -> &mut DxDir {
        // At most one per inode: below 2^32.
        let n = ext4r_format::num::sat_u32(self.dirs.len());
        let i = *self.slot.entry(ino).or_insert(n) as usize;
        if i == self.dirs.len() {
            self.dirs.push((ino, DxDir::default()));
        }
        &mut self.dirs[i].1
    }

    /// The records in inode order.
    fn into_sorted(self) -> Vec<(u32, DxDir)> {
        let mut dirs = self.dirs;
        dirs.sort_unstable_by_key(|d| d.0);
        dirs
    }
}

pub(crate) fn version_for(c: &Ctx, stored: u8) -> u8 {
    let unsigned = c.sb().s_flags.get() & FLAGS_UNSIGNED_HASH != 0;
    effective_hash_version(stored, unsigned)
}

pub(crate) fn note_root(c: &Ctx, dx: &mut DxDirs, ino: u32, root: &DxRootBlock<'_>) {
    let v = version_for(c, root.root.info.hash_version);
    let entries = root.entries.iter().collect();
    dx.entry(ino).root = Some((entries, root.root.info.indirect_levels, v));
}

/// Records a root whose index has no entries (count 0), with its hash
/// version and depth as stored.
pub(crate) fn note_empty_root(c: &Ctx, dx: &mut DxDirs, ino: u32, hash: u8, levels: u8) {
    let v = version_for(c, hash);
    dx.entry(ino).root = Some((Vec::new(), levels, v));
}

/// Records an interior node; false when it does not parse as one.
pub(crate) fn note_node(dx: &mut DxDirs, ino: u32, lblk: u64, block: &[u8]) -> bool {
    match parse_dx_node(block) {
        Ok(e) => {
            let l = u32::try_from(lblk).unwrap_or(u32::MAX);
            dx.entry(ino).nodes.insert(l, e.iter().collect());
            true
        }
        Err(_) => false,
    }
}

/// Records the hash range of a leaf's names.
pub(crate) fn note_leaf<'a>(
    c: &Ctx,
    dx: &mut DxDirs,
    ino: u32,
    lblk: u64,
    names: impl FnOnce() -> Vec<&'a [u8]>,
    pre: Option<(u32, u32, u8)>,
) {
    let d = dx.entry(ino);
    let stored = d.root.as_ref().map_or(c.sb().s_def_hash_version, |r| r.2);
    let v = if d.root.is_some() {
        stored
    } else {
        version_for(c, stored)
    };
    let l = u32::try_from(lblk).unwrap_or(u32::MAX);
    // Hashed ahead on another thread with the default version: use it
    // when that is this directory's version.
    if let Some((lo, hi, pv)) = pre {
        if pv == v {
            d.note_leaf(l, (lo, hi, v));
            return;
        }
    }
    let seed = c.sb().hash_seed();
    let mut lo = u32::MAX;
    let mut hi = 0u32;
    for n in names() {
        if let Ok(h) = dx_hash(v, n, &seed) {
            lo = lo.min(h.major);
            hi = hi.max(h.major);
        }
    }
    d.note_leaf(l, (lo, hi, v));
}

/// The lowest and highest major hash of a leaf block's names (not `.`,
/// `..` or unused records), for `note_leaf`; computed off the main thread
/// from the block's records up to the first that does not parse (walked
/// once by the caller for all its tests).
pub(crate) fn leaf_range(records: &[DirEntry<'_>], version: u8, seed: &[u32; 4]) -> (u32, u32) {
    let mut lo = u32::MAX;
    let mut hi = 0u32;
    let mut take = |h: Result<DxHash, _>| {
        if let Ok(h) = h {
            lo = lo.min(h.major);
            hi = hi.max(h.major);
        }
    };
    // Four names at a time through the hash (see `dx_hash4`): pass 2
    // hashes every name of every indexed directory.
    let mut four: [&[u8]; 4] = [&[]; 4];
    let mut n = 0;
    for e in records {
        if e.inode.0 == 0 || e.name == b"." || e.name == b".." {
            continue;
        }
        four[n] = e.name;
        n += 1;
        if n == 4 {
            dx_hash4(version, four, seed)
                .into_iter()
                .for_each(&mut take);
            n = 0;
        }
    }
    for name in &four[..n] {
        take(dx_hash(version, name, seed));
    }
    (lo, hi)
}

/// Walks each recorded tree and reports what e2fsck reports, in its
/// order: a node's unordered hash table as soon as it is seen (e2fsck
/// clears the index there and looks no further), then per block in
/// logical order what the walk found (not referenced or referenced twice,
/// depth, hash range), then the question for the directory.
pub(crate) fn check(c: &mut Ctx, dx: DxDirs) {
    for (ino, d) in dx.into_sorted() {
        let Some((root, levels, v)) = &d.root else {
            continue;
        };
        // (logical block, code, what)
        let mut problems: Vec<(u32, ProblemCode, String)> = Vec::new();
        let mut referenced: HashMap<u32, u32> = HashMap::new();
        // (node's block, entries, min, max, depth of the entries' children)
        let mut stack: Vec<(u32, Entries, u32, u32, u8)> = vec![(0, root.clone(), 0, u32::MAX, 1)];
        let mut budget = 100_000u32;
        let mut unordered_node = None;
        while let Some((at, entries, min, max, depth)) = stack.pop() {
            // Hashes rise through a node (the first slot has none).
            if entries
                .windows(2)
                .skip(1)
                .any(|w| w[1].0 & !1 < w[0].0 & !1)
            {
                unordered_node = Some(at);
                break;
            }
            for (i, &(h, blk)) in entries.iter().enumerate() {
                budget = budget.saturating_sub(1);
                if budget == 0 {
                    break;
                }
                let lblk = blk & 0x0fff_ffff;
                let lo = if i == 0 { min } else { h & !1 };
                let hi = entries.get(i + 1).map_or(max, |n| n.0 & !1);
                *referenced.entry(lblk).or_default() += 1;
                if referenced[&lblk] > 1 {
                    problems.push((
                        lblk,
                        ProblemCode::PR_2_HTREE_DUPREF,
                        "referenced twice".into(),
                    ));
                    continue;
                }
                if depth <= *levels {
                    match d.nodes.get(&lblk) {
                        Some(n) => stack.push((lblk, n.clone(), lo, hi, depth + 1)),
                        None => problems.push((
                            lblk,
                            ProblemCode::PR_2_HTREE_BAD_DEPTH,
                            format!("has invalid depth ({depth})"),
                        )),
                    }
                    continue;
                }
                match d.leaf(lblk) {
                    Some(&(lmin, lmax, lv)) => {
                        if lv != *v || lmin > lmax {
                            continue;
                        }
                        if lblk != 0 && lmin < lo {
                            problems.push((
                                lblk,
                                ProblemCode::PR_2_HTREE_MIN_HASH,
                                "has bad min hash".into(),
                            ));
                        }
                        if lmax > hi {
                            problems.push((
                                lblk,
                                ProblemCode::PR_2_HTREE_MAX_HASH,
                                "has bad max hash".into(),
                            ));
                        }
                    }
                    None if d.nodes.contains_key(&lblk) => problems.push((
                        lblk,
                        ProblemCode::PR_2_HTREE_BAD_DEPTH,
                        format!("has invalid depth ({depth})"),
                    )),
                    None => problems.push((lblk, ProblemCode::PR_2_HTREE_BADBLK, String::new())),
                }
            }
        }
        if let Some(at) = unordered_node {
            c.report(Subject::InodeAt(ino, u64::from(at))).error_fix(
                2,
                ProblemCode::PR_2_HTREE_HASH_ORDER,
                format!("Problem in HTREE directory inode {ino}: block #{at} has an unordered hash table"),
                crate::fix::Fix::ClearIndexFlag(ino),
            );
            continue;
        }
        let blocks: BTreeSet<u32> = d
            .leaves
            .iter()
            .map(|l| &l.0)
            .chain(d.nodes.keys())
            .copied()
            .collect();
        for &l in &blocks {
            if l != 0 && !referenced.contains_key(&l) {
                // No parent gave it a range: e2fsck's is 0..0, which any
                // hash but 0 exceeds.
                if let Some(&(lmin, lmax, lv)) = d.leaf(l) {
                    if lv == *v && lmin <= lmax && lmax > 0 {
                        problems.push((
                            l,
                            ProblemCode::PR_2_HTREE_MAX_HASH,
                            "has bad max hash".into(),
                        ));
                    }
                }
                problems.push((l, ProblemCode::PR_2_HTREE_NOTREF, "not referenced".into()));
            }
        }
        // Per block in logical order; a block's own problems as found.
        problems.sort_by_key(|p| p.0);
        for (l, code, what) in &problems {
            let message = if *code == ProblemCode::PR_2_HTREE_BADBLK {
                format!(
                    "Problem in HTREE directory inode {ino} ({}): bad block number {l}.",
                    crate::pathname::dir_path(c.fs(), ino)
                )
            } else {
                format!("Problem in HTREE directory inode {ino}: block #{l} {what}")
            };
            c.report(Subject::InodeAt(ino, u64::from(*l))).error_fix(
                2,
                *code,
                message,
                crate::fix::Fix::ClearIndexFlag(ino),
            );
        }
        if !problems.is_empty() {
            let path = crate::pathname::dir_path(c.fs(), ino);
            c.report(Subject::Inode(ino)).error_fix(
                2,
                ProblemCode::PR_2_HTREE_CLEAR,
                format!("Invalid HTREE directory inode {ino} ({path})."),
                crate::fix::Fix::ClearIndexFlag(ino),
            );
        }
    }
}
