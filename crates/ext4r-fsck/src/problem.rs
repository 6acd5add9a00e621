//! Problems the checker finds, in words an e2fsck user recognises.

use crate::codes::ProblemCode;
/// How a problem counts towards the verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// An inconsistency: leaving it unfixed makes the exit code 4.
    Error,
    /// Reported, but leaving it alone is fine (e2fsck's `PR_NO_OK`: the
    /// superblock's summary counts, optimisations, a missing file type).
    Harmless,
}

/// One finding: which pass, e2fsck's problem name, and a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The pass that found it (0 = superblock and descriptors, 1–5 as
    /// e2fsck's passes).
    pub pass: u8,
    /// e2fsck's name for the problem (`PR_1_BAD_I_BLOCKS`), so that the
    /// report can be compared with e2fsck's.
    pub code: ProblemCode,
    /// Whether it is an error.
    pub severity: Severity,
    /// What and where, in e2fsck's words.
    pub message: String,
    /// What the problem is about, typed: with the code, what names this
    /// problem from one round's check to the next (see [`Problem::key`]).
    pub subject: Subject,
    /// The repair, when this version knows one.
    pub fix: Option<crate::fix::Fix>,
    /// The latch question e2fsck asks before this problem, once for a run
    /// of related problems (see [`Latch`]).
    pub latch: Option<Latch>,
}

/// What a problem is about: the place a repair's answer and the
/// "said once" of a repair run are keyed on, with the problem's code. It
/// is as fine as the problem's words: two problems of one code whose
/// words differ have different subjects, and the same words the same.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Subject {
    /// The filesystem as a whole: its superblock's fields, features and
    /// counts.
    Filesystem,
    /// The primary superblock as a block: its checksum, or its being
    /// unusable (a backup standing in).
    Superblock,
    /// The journal (its inode, superblock or device).
    Journal,
    /// Block group `g` (its descriptor, bitmaps, counts).
    Group(u32),
    /// Inode `ino`.
    Inode(u32),
    /// A place `at` within inode `ino`: the logical block, block-map
    /// slot or extent a problem of its mapping is about.
    InodeAt(u32, u64),
    /// A pointer of inode `ino`'s mapping: in `block` (None: the inode's
    /// `i_block`) at entry `index`.
    Pointer {
        /// The inode.
        ino: u32,
        /// The block holding the pointer; None: the inode.
        block: Option<u64>,
        /// Its index there.
        index: usize,
    },
    /// Inode `ino`'s extended attribute block `block` (shared blocks are
    /// judged for each inode naming them).
    XattrBlock {
        /// The inode.
        ino: u32,
        /// The block.
        block: u64,
    },
    /// Block `b` of the filesystem.
    Block(u64),
    /// Block `b` claimed by both owners (inodes; 0 the filesystem's
    /// metadata).
    Shared(u64, u32, u32),
    /// The entry at byte `offset` of directory `dir`'s block `lblk`.
    Entry {
        /// The directory's inode.
        dir: u32,
        /// The block, by its logical number in the directory.
        lblk: u64,
        /// The record's offset in the block.
        offset: u32,
    },
    /// The directory record at byte `offset` of block `block` (by its
    /// place on the device).
    Record {
        /// The block.
        block: u64,
        /// The record's offset in it.
        offset: u32,
    },
    /// A part of group `group`'s metadata (`part`: its name, "block
    /// bitmap", "inode table").
    GroupPart {
        /// The group.
        group: u32,
        /// Which part.
        part: &'static str,
    },
    /// Quota type `q` (0 user, 1 group, 2 project).
    Quota(u8),
}

/// What a problem is about: its code and subject. With the repair it
/// offers it names the problem for a repair run's answers and its "said
/// once" (see [`Seen`]), never with its words.
pub type Key = (ProblemCode, Subject);

/// Problems met, each with a value (an answer): one problem is the same
/// as another when its code, its subject and the repair it offers are
/// (a later round that finds other values, a count still wrong after a
/// fix, offers another repair: another problem).
#[derive(Debug)]
pub struct Seen<V> {
    map: std::collections::HashMap<Key, Vec<(Option<crate::fix::Fix>, V)>>,
}

impl<V> Default for Seen<V> {
    fn default() -> Self {
        Seen {
            map: std::collections::HashMap::new(),
        }
    }
}

impl<V: Copy> Seen<V> {
    /// The value recorded for `p`.
    pub fn get(&self, p: &Problem) -> Option<V> {
        self.map
            .get(&p.key())?
            .iter()
            .find(|(fix, _)| same_repair(fix, &p.fix))
            .map(|&(_, v)| v)
    }

    /// Records `v` for `p` unless `p` was met: whether it was not.
    pub fn insert(&mut self, p: &Problem, v: V) -> bool {
        let met = self.map.entry(p.key()).or_default();
        if met.iter().any(|(fix, _)| same_repair(fix, &p.fix)) {
            return false;
        }
        met.push((p.fix.clone(), v));
        true
    }

    /// Whether a problem of code `code` was met.
    pub fn any_of(&self, code: ProblemCode) -> bool {
        self.map.keys().any(|(c, _)| *c == code)
    }
}

impl Subject {
    /// The pointer of inode `ino` stored at `slot`.
    pub(crate) fn pointer(ino: u32, slot: ext4r_txn::map::walk::Slot) -> Self {
        Subject::Pointer {
            ino,
            block: slot.block,
            index: slot.index,
        }
    }
}

impl Problem {
    /// What this problem is about: its code and subject.
    pub fn key(&self) -> Key {
        (self.code, self.subject.clone())
    }

    /// Whether `other` is the same problem: the same code, subject and
    /// repair (see [`Seen`]).
    pub fn is_same(&self, other: &Problem) -> bool {
        self.code == other.code
            && self.subject == other.subject
            && same_repair(&self.fix, &other.fix)
    }
}

/// [`Problems`] recording about one [`Subject`] (from [`Problems::on`]).
pub struct On<'a> {
    problems: &'a mut Problems,
    subject: Subject,
}

impl On<'_> {
    /// Records an error.
    pub fn error(self, pass: u8, code: ProblemCode, message: String) {
        self.problems
            .push(pass, code, Severity::Error, message, None, self.subject);
    }

    /// Records an error and its repair.
    pub fn error_fix(self, pass: u8, code: ProblemCode, message: String, fix: crate::fix::Fix) {
        self.problems.push(
            pass,
            code,
            Severity::Error,
            message,
            Some(fix),
            self.subject,
        );
    }

    /// Records an error, with its repair when there is one.
    pub fn error_or_fix(
        self,
        pass: u8,
        code: ProblemCode,
        message: String,
        fix: Option<crate::fix::Fix>,
    ) {
        self.problems
            .push(pass, code, Severity::Error, message, fix, self.subject);
    }

    /// Records a harmless finding, with its repair when there is one.
    pub fn harmless_or_fix(
        self,
        pass: u8,
        code: ProblemCode,
        message: String,
        fix: Option<crate::fix::Fix>,
    ) {
        self.problems
            .push(pass, code, Severity::Harmless, message, fix, self.subject);
    }

    /// Records a harmless finding.
    pub fn harmless(self, pass: u8, code: ProblemCode, message: String) {
        self.problems
            .push(pass, code, Severity::Harmless, message, None, self.subject);
    }

    /// Records a harmless finding that a repair run still corrects.
    pub fn harmless_fix(self, pass: u8, code: ProblemCode, message: String, fix: crate::fix::Fix) {
        self.problems.push(
            pass,
            code,
            Severity::Harmless,
            message,
            Some(fix),
            self.subject,
        );
    }
}

/// Whether two repairs decide the same: equal, but for the plan a round
/// makes for them (the blocks a new root, lost+found, directory block or
/// relocation takes, the copies of a clone, the records of a quota
/// update, a rebuilt tree): a repair planned again in a later round, as it
/// waits for another, is the same repair. Values found (a count, a
/// bitmap's bits) are not a plan: another value is another repair.
fn same_repair(a: &Option<crate::fix::Fix>, b: &Option<crate::fix::Fix>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => same_decision(a, b),
        (a, b) => a.is_none() && b.is_none(),
    }
}

/// [`same_repair`] of two repairs.
fn same_decision(a: &crate::fix::Fix, b: &crate::fix::Fix) -> bool {
    use crate::fix::Fix as F;
    match (a, b) {
        (F::MakeRoot(_), F::MakeRoot(_))
        | (F::MakeLostFound(_), F::MakeLostFound(_))
        | (F::RecreateResizeInode(_), F::RecreateResizeInode(_))
        | (F::RebuildExtents(_), F::RebuildExtents(_))
        | (F::ExtentsFromMap(_), F::ExtentsFromMap(_))
        | (F::NewOrphanFile(_), F::NewOrphanFile(_))
        | (F::RehashDir(_), F::RehashDir(_)) => true,
        (F::UpdateQuota(q, _), F::UpdateQuota(r, _)) => q == r,
        (F::CloneBlocks(i, ..), F::CloneBlocks(j, ..))
        | (F::ExpandDir(i, _), F::ExpandDir(j, _))
        | (F::DirBlock0(i, ..), F::DirBlock0(j, ..)) => i == j,
        (F::DirBlockAt(i, l, ..), F::DirBlockAt(j, m, ..)) => (i, l) == (j, m),
        (F::Relocate(g, m, _), F::Relocate(h, n, _)) => (g, m) == (h, n),
        (F::RelocateFrom(g, m, f, _), F::RelocateFrom(h, n, e, _)) => (g, m, f) == (h, n, e),
        (F::Each(x), F::Each(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same_decision(a, b))
        }
        _ => a == b,
    }
}

/// e2fsck's latches (`PR_LATCH_*`): a run of related problems (an inode's
/// illegal blocks, the descriptors' checksums) is asked about once, by
/// the latch's own question ("Inode 13 has illegal block(s).  Clear?"),
/// and each problem of the run is then said with the answer ("Illegal
/// block #0 (7303014) in inode 13.  IGNORED."). The run is the problems
/// with the same latch in a row; a latch whose question is said without
/// one (`PROMPT_NONE`: "Block bitmap differences: ") only puts its words
/// first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Latch {
    /// e2fsck's code of the latch question (`PR_1_INODE_BLOCK_LATCH`).
    pub code: ProblemCode,
    /// Its message, in e2fsck's words.
    pub message: String,
}

/// Collected problems with a cap on how many messages are kept, so a badly
/// damaged volume cannot make the report grow without bound.
#[derive(Debug, Default)]
pub struct Problems {
    list: Vec<Problem>,
    overflow_fixes: Vec<crate::fix::Fix>,
    errors: u64,
    dropped: u64,
    /// Keeps every message: a pass-1 worker's findings for a stretch of
    /// inodes, which go through [`Problems::absorb`] (and its cap) later.
    uncapped: bool,
    /// The last problem recorded was kept (not dropped past the cap).
    last_kept: bool,
}

/// Messages kept in full; beyond this only the counts grow.
const KEEP: usize = 10_000;

impl Problems {
    /// Records what follows as about `subject`.
    pub fn on(&mut self, subject: Subject) -> On<'_> {
        On {
            problems: self,
            subject,
        }
    }

    fn push(
        &mut self,
        pass: u8,
        code: ProblemCode,
        severity: Severity,
        message: String,
        fix: Option<crate::fix::Fix>,
        subject: Subject,
    ) {
        if severity == Severity::Error {
            self.errors += 1;
        }
        self.last_kept = self.list.len() < KEEP || self.uncapped;
        if self.last_kept {
            self.list.push(Problem {
                pass,
                code,
                severity,
                message,
                subject,
                fix,
                latch: None,
            });
        } else {
            // Past the cap a repair still needs the fix; the words go.
            self.dropped += 1;
            if let Some(f) = fix {
                self.overflow_fixes.push(f);
            }
        }
    }

    /// Puts the last problem recorded under latch `code`, asked as
    /// `message` (see [`Latch`]); nothing when its words were dropped.
    pub(crate) fn latch_last(&mut self, code: ProblemCode, message: String) {
        if let Some(p) = self.list.last_mut().filter(|_| self.last_kept) {
            p.latch = Some(Latch { code, message });
        }
    }

    /// Makes the errors recorded from position `from` on that `which`
    /// accepts harmless: what e2fsck -n answers no to before it marks the
    /// filesystem valid "'til proven otherwise" (its superblock and
    /// descriptor checks) does not make its exit code 4.
    pub(crate) fn forgive_from(&mut self, from: usize, which: impl Fn(&Problem) -> bool) {
        for p in self.list.iter_mut().skip(from) {
            if p.severity == Severity::Error && which(p) {
                p.severity = Severity::Harmless;
                self.errors = self.errors.saturating_sub(1);
            }
        }
    }

    /// Takes out the problems recorded at positions `range` (from
    /// [`Problems::mark`]s), in order, their errors uncounted.
    pub(crate) fn take_range(&mut self, range: std::ops::Range<usize>) -> Vec<Problem> {
        let end = range.end.min(self.list.len());
        let start = range.start.min(end);
        let out: Vec<Problem> = self.list.drain(start..end).collect();
        let errors = out.iter().filter(|p| p.severity == Severity::Error).count() as u64;
        self.errors = self.errors.saturating_sub(errors);
        out
    }

    /// Puts `problems` back at position `at`, their errors counted.
    pub(crate) fn insert_at(&mut self, at: usize, problems: Vec<Problem>) {
        let at = at.min(self.list.len());
        self.errors += problems
            .iter()
            .filter(|p| p.severity == Severity::Error)
            .count() as u64;
        self.list.splice(at..at, problems);
    }

    /// The number of problems kept so far: a place for
    /// [`Problems::move_last_to`].
    /// Each kept problem, to be changed in place (a path filled in).
    pub(crate) fn each_mut(&mut self) -> std::slice::IterMut<'_, Problem> {
        self.list.iter_mut()
    }

    pub(crate) fn mark(&self) -> usize {
        self.list.len()
    }

    /// Moves the last problem to position `at` (from [`Problems::mark`]),
    /// before those recorded since: a problem e2fsck says first whose
    /// repair depends on what the later ones found.
    pub(crate) fn move_last_to(&mut self, at: usize) {
        if at < self.list.len() {
            if let Some(p) = self.list.pop() {
                self.list.insert(at, p);
            }
        }
    }

    /// A list without the cap, for findings that [`Problems::absorb`] adds
    /// to a capped one.
    pub(crate) fn uncapped() -> Self {
        Problems {
            uncapped: true,
            ..Problems::default()
        }
    }

    /// Adds `other`'s findings after these, as if each had been found here
    /// (the cap applies as it would have).
    pub(crate) fn absorb(&mut self, other: Problems) {
        debug_assert_eq!(other.dropped, 0, "absorbed from a capped list");
        for p in other.list {
            let latch = p.latch;
            self.push(p.pass, p.code, p.severity, p.message, p.fix, p.subject);
            if let Some(l) = latch {
                self.latch_last(l.code, l.message);
            }
        }
        for f in other.overflow_fixes {
            self.overflow_fixes.push(f);
        }
    }

    /// Number of errors found (also those whose message was dropped).
    pub fn errors(&self) -> u64 {
        self.errors
    }

    /// Messages not kept because of the cap.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// The kept problems in the order found.
    pub fn list(&self) -> &[Problem] {
        &self.list
    }

    /// Every repair the problems carry, in the order found.
    pub fn fixes(&self) -> Vec<crate::fix::Fix> {
        self.list
            .iter()
            .filter_map(|p| p.fix.clone())
            .chain(self.overflow_fixes.iter().cloned())
            .collect()
    }

    /// Keeps only the problems `keep` accepts (the error count follows;
    /// for use before the cap is reached).
    pub(crate) fn retain(&mut self, keep: impl Fn(&Problem) -> bool) {
        self.list.retain(|p| keep(p));
        self.errors = self
            .list
            .iter()
            .filter(|p| p.severity == Severity::Error)
            .count() as u64
            + self.dropped;
    }

    /// The repairs of problems past the cap (their messages were dropped).
    pub(crate) fn overflow_fixes(&self) -> &[crate::fix::Fix] {
        &self.overflow_fixes
    }

    /// Errors that no known repair addresses.
    pub fn unfixable(&self) -> impl Iterator<Item = &Problem> {
        self.list
            .iter()
            .filter(|p| p.severity == Severity::Error && p.fix.is_none())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn harmless_findings_do_not_count_as_errors_and_the_list_is_capped() {
        let mut p = Problems::default();
        p.on(Subject::Filesystem)
            .harmless(5, ProblemCode::PR_5_FREE_BLOCK_COUNT, "x".into());
        assert_eq!(p.errors(), 0);
        for i in 0..(KEEP + 5) {
            p.on(Subject::Inode(i as u32))
                .error(1, ProblemCode::PR_1_BAD_I_SIZE, i.to_string());
        }
        assert_eq!(p.errors(), (KEEP + 5) as u64);
        assert_eq!(p.list().len(), KEEP);
        assert_eq!(p.dropped(), 6);
    }
}
