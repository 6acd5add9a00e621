//! Pass 3A as the check sees it: which directories e2fsck rebuilds after
//! pass 3 (its `dirs_to_hash`), the "Pass 3A: Optimizing directories"
//! heading said there, before pass 4, and the repeated names its rebuild
//! finds over a whole directory (e2fsck's `duplicate_search_and_fix`).
//! The rebuild itself is the repair's (see `crate::rehash`).
//!
//! The list, as e2fsck 1.47 fills it: pass 1 (when it may write and the
//! filesystem has dir_index) adds a directory whose index it cleared and
//! a linear one whose size is three blocks or more, /lost+found aside;
//! pass 2 adds a directory whose index it cleared, one with a leaf block
//! without room for its checksum, and one with a name twice in a block
//! ("Duplicate entry ... found. Marking ... to be rebuilt", also under
//! `-n`).

use crate::codes::ProblemCode;
use crate::problem::Subject;
use ext4r_format::dir::{rec_len_for_name, DirBlockIter};
use ext4r_format::features::Compat;
use ext4r_format::htree::{dx_hash, effective_hash_version};
use ext4r_format::inode::InodeFlags;
use ext4r_format::superblock::FLAGS_UNSIGNED_HASH;
use ext4r_format::InodeNr;

use crate::ctx::Ctx;
use crate::fix::Fix;

/// Settles pass 1's list before pass 2: /lost+found is not rebuilt (e2fsck
/// looks it up before its pass 1), and a linear directory is listed only
/// when the repair's rebuild gives it e2fsck's shape (an index, or fewer
/// blocks): one it would leave as it is would be listed again by every
/// later check.
pub(crate) fn settle(c: &mut Ctx) {
    if c.rehash_dirs().is_empty() {
        return;
    }
    let lost_found = crate::rehash::lost_found(c.fs());
    let fs = c.shared_fs();
    c.rehash_only(|&ino| {
        if Some(ino) == lost_found {
            return false;
        }
        let Ok(info) = fs.inode(InodeNr(ino)) else {
            return false;
        };
        // An index pass 1 cleared: rebuilt whatever its size.
        if info.inode.flags().contains(InodeFlags::INDEX) {
            return true;
        }
        crate::rehash::plan(&fs, ino, lost_found).is_some_and(|r| r.index || !r.release.is_empty())
    });
}

/// After pass 3: the heading and the repeated names, when a directory is
/// to be rebuilt. Its findings are pass 3's (said after it).
pub(crate) fn run(c: &mut Ctx) {
    if c.repairing() {
        // Indexes pass 2 cleared (e2fsck's `clear_htree`).
        let cleared: Vec<u32> = c
            .problems()
            .list()
            .iter()
            .filter_map(|p| match p.fix {
                Some(Fix::ClearIndexFlag(ino)) => Some(ino),
                _ => None,
            })
            .collect();
        for ino in cleared {
            c.rehash(ino);
        }
    }
    let dirs = c.rehash_only_dirs();
    if dirs.is_empty() {
        return;
    }
    c.report(Subject::Filesystem).harmless(
        3,
        ProblemCode::PR_3A_PASS_HEADER,
        "Pass 3A: Optimizing directories".into(),
    );
    let mut blocks = c.take_dir_blocks();
    blocks.sort_unstable_by_key(|b| (b.ino, b.lblk));
    for ino in dirs {
        let from = blocks.partition_point(|b| b.ino < ino);
        let to = blocks.partition_point(|b| b.ino <= ino);
        let phys: Vec<u64> = blocks[from..to].iter().map(|b| b.phys).collect();
        duplicates(c, ino, &phys);
    }
}

/// One live entry as the rebuild sorts it.
struct Ent {
    hash: (u32, u32),
    name: Vec<u8>,
    /// 0 once cleared.
    ino: u32,
    phys: u64,
    offset: usize,
}

impl Ent {
    /// The entry as what a problem is about.
    fn subject(&self) -> Subject {
        Subject::Record {
            block: self.phys,
            offset: u32::try_from(self.offset).unwrap_or(u32::MAX),
        }
    }
}

/// The directory's entries, in block order; None when a block does not
/// read or parse (e2fsck gives up rebuilding it then).
fn read_entries(c: &Ctx, ino: u32, phys: &[u64]) -> Option<Vec<Ent>> {
    // Entries pass 2 clears this round are gone by pass 3A.
    let cleared = c.entries_cleared(ino);
    let bs = c.geo().block_size;
    let mut buf = vec![0u8; bs as usize];
    let mut out = Vec::new();
    for &b in phys {
        c.fs().device().read_at(&mut buf, b * u64::from(bs)).ok()?;
        for e in DirBlockIter::with_block_size(&buf, bs) {
            let e = e.ok()?;
            if e.inode.0 == 0 || cleared.contains(&(b, e.offset)) {
                continue;
            }
            out.push(Ent {
                hash: (0, 0),
                name: e.name.to_vec(),
                ino: e.inode.0,
                phys: b,
                offset: e.offset,
            });
        }
    }
    Some(out)
}

/// e2fsck's duplicate search over directory `ino` (blocks `phys` in
/// logical order): a name twice for one inode is cleared, for two inodes
/// the later is renamed (`mutate_name`), or cleared when names are
/// encrypted. Under `-n` each is said and declined.
fn duplicates(c: &mut Ctx, ino: u32, phys: &[u64]) {
    let Some(dir) = c.dir_idx(ino).map(|d| c.dirs()[d]) else {
        return;
    };
    // Case-folded names compare folded: not looked at here.
    if dir.inline() || dir.casefold() {
        return;
    }
    let Some(mut ents) = read_entries(c, ino, phys) else {
        return;
    };
    let Ok(info) = c.fs().inode(InodeNr(ino)) else {
        return;
    };
    let bs = u64::from(c.geo().block_size);
    let sb = c.sb();
    // As e2fsck's rehash: a directory under two blocks, or whose entries
    // fill less than one, is compacted (entries by name, '.' and '..'
    // first); otherwise indexed (entries by hash, the dots left out).
    let mut compress = !sb.has_compat(Compat::DIR_INDEX) || info.inode.size() / bs < 2;
    let dot = |e: &Ent| e.name == b"." || e.name == b"..";
    if !compress {
        let size: u64 = ents
            .iter()
            .filter(|e| !dot(e))
            .map(|e| rec_len_for_name(e.name.len()) as u64)
            .sum();
        compress = size < bs - 24;
    }
    if !compress {
        ents.retain(|e| !dot(e));
    }
    let version = effective_hash_version(
        sb.s_def_hash_version,
        sb.s_flags.get() & FLAGS_UNSIGNED_HASH != 0,
    );
    let seed = sb.hash_seed();
    let hash = |name: &[u8]| {
        if compress {
            (0, 0)
        } else {
            dx_hash(version, name, &seed).map_or((0, 0), |h| (h.major, h.minor))
        }
    };
    for e in &mut ents {
        e.hash = hash(&e.name);
    }
    let skip = if compress { 2.min(ents.len()) } else { 0 };
    let path = crate::pathname::dir_path(c.fs(), ino);
    // Bounded: each round that changes something renames or clears.
    for _ in 0..64 {
        // By hash, then name, then inode from the highest (e2fsck's
        // hash_cmp); stable, so the same name and inode keep their order.
        ents[skip..].sort_by(|a, b| {
            (a.hash, &a.name, std::cmp::Reverse(a.ino)).cmp(&(
                b.hash,
                &b.name,
                std::cmp::Reverse(b.ino),
            ))
        });
        let mut fixed = 0;
        for i in 1..ents.len() {
            if ents[i].ino == 0 || ents[i].name != ents[i - 1].name {
                continue;
            }
            let shown = crate::pathname::safe(&ents[i].name);
            let target = ents[i].ino;
            // The entry goes, and (when it is taken away) its name from
            // what pass 4 counts and a link from the inode's count, as
            // e2fsck's `e2fsck_adjust_inode_count` does.
            let clear = |c: &mut Ctx, e: &Ent| {
                let mut fixes = vec![Fix::DirEntryClear(e.phys, e.offset, dir.owner())];
                let links = c.inodes().get(target).map_or(0, |r| r.links);
                let k = c.link_drops(target);
                if links > k {
                    fixes.push(Fix::InodeLinks(target, links - k - 1));
                }
                if c.repairing() {
                    c.name_dropped(target);
                    if links > k {
                        c.drop_link(target);
                    }
                }
                Fix::Each(fixes)
            };
            if target == ents[i - 1].ino {
                let fix = clear(c, &ents[i]);
                c.report(ents[i].subject()).error_fix(
                    3,
                    ProblemCode::PR_2_DUPLICATE_DIRENT,
                    format!("Duplicate entry '{shown}' in {path} ({ino}) found."),
                    fix,
                );
                if c.repairing() {
                    ents[i].ino = 0;
                    fixed += 1;
                    continue;
                }
            }
            if dir.encrypted() {
                let fix = clear(c, &ents[i]);
                c.report(ents[i].subject()).error_fix(
                    3,
                    ProblemCode::PR_2_NON_UNIQUE_FILE_NO_RENAME,
                    format!("Duplicate filename entry '{shown}' in {path} ({ino}) found."),
                    fix,
                );
                if c.repairing() {
                    ents[i].ino = 0;
                    fixed += 1;
                    continue;
                }
            }
            let mut new = ents[i].name.clone();
            crate::pass2::mutate_name(&mut new);
            let mut tries = 0;
            while tries < 100_000
                && ents
                    .iter()
                    .enumerate()
                    .any(|(j, e)| j != i && e.name == new)
            {
                crate::pass2::mutate_name(&mut new);
                tries += 1;
            }
            c.report(ents[i].subject()).error_fix(
                3,
                ProblemCode::PR_2_NON_UNIQUE_FILE,
                format!(
                    "Entry '{shown}' in {path} ({ino}) has a non-unique filename.\nRename to {}",
                    String::from_utf8_lossy(&new)
                ),
                Fix::DirEntryRename(ents[i].phys, ents[i].offset, new.clone(), dir.owner()),
            );
            if c.repairing() {
                ents[i].hash = hash(&new);
                ents[i].name = new;
                fixed += 1;
            }
        }
        if fixed == 0 {
            break;
        }
    }
}
