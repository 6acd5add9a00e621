//! The moves themselves: a file's mapping read and checked, new places
//! allocated, data copied, the mapping switched (see the protocol in the
//! [module docs](super)).

use ext4r_format::num;
use std::time::Instant;

use ext4r::fs::Run;
use ext4r_format::blockmap::addr_per_block;
use ext4r_format::extent::{max_entries, write_leaf, EXT_UNWRITTEN_MAX_LEN};
use ext4r_format::inode::{Inode, InodeFlags};
use ext4r_txn::map;

use super::layout::{self, Move};
use super::tree;
use super::OfflineFs;
use crate::online::{Outcome, Skip};

/// Blocks copied per read: bounds the memory of a copy, whatever the file.
const COPY_CHUNK_BYTES: u64 = 4 << 20;

/// A regular file's mapping as committed, checked for a move.
#[derive(Debug, Clone)]
pub struct FileMap {
    /// Inode number.
    pub ino: u32,
    /// The inode.
    pub inode: Inode,
    /// Data runs, by logical block.
    pub runs: Vec<Run>,
    /// Tree or indirect blocks.
    pub tree: Vec<u64>,
}

impl FileMap {
    /// Blocks of data mapped.
    pub fn blocks(&self) -> u64 {
        self.runs.iter().map(|r| r.len).sum()
    }

    /// Extents as the read path (and `-c` on an image) counts them.
    pub fn extents(&self) -> u64 {
        self.runs.len() as u64
    }

    /// Whether it is mapped by an extent tree.
    pub fn extent_mapped(&self) -> bool {
        self.inode.flags().contains(InodeFlags::EXTENTS)
    }
}

/// Whether two sorted lists of `(start, len)` ranges overlap.
fn overlaps(a: &[(u64, u64)], b: &[(u64, u64)]) -> bool {
    a.iter()
        .any(|&(s, n)| b.iter().any(|&(t, m)| s < t + m && t < s + n))
}

/// Mapping blocks a mapping of `runs` needs at most: extent leaves and
/// index blocks, or indirect blocks.
pub(crate) fn tree_estimate(runs: &[Run], extents: bool, bs: u64) -> u64 {
    if extents {
        let max = u64::from(EXT_UNWRITTEN_MAX_LEN);
        let records: u64 = runs.iter().map(|r| r.len.div_ceil(max)).sum();
        if records <= 4 {
            return 0;
        }
        let per = u64::from(max_entries(num::index(bs))).max(1);
        let (mut level, mut total) = (records.div_ceil(per), 0);
        total += level;
        while level > 4 {
            level = level.div_ceil(per);
            total += level;
        }
        total
    } else {
        let apb = u64::from(addr_per_block(num::sat_u32(bs))).max(1);
        let blocks: u64 = runs.iter().map(|r| r.len).sum();
        if blocks <= 12 {
            return 0;
        }
        blocks.div_ceil(apb) + blocks.div_ceil(apb * apb) + 3
    }
}

impl OfflineFs {
    /// Reads inode `ino` as committed and checks that it can be moved:
    /// a regular file, not immutable or append-only (left alone as by
    /// e4defrag, xfs_fsr and the kernel), not inline, its block count
    /// agreeing with its mapping and nothing mapped past its size.
    ///
    /// # Errors
    /// The [`Outcome`] to report instead: `Skipped` with the reason (gone,
    /// not regular, immutable, unmappable, inconsistent), or `Failed` when
    /// the inode cannot be read.
    pub fn load(&self, ino: u32) -> Result<FileMap, Outcome> {
        let failed =
            |e: ext4r::Error| Outcome::Failed(format!("inode {ino}: {}", ext4r::error::chain(&e)));
        let rec = self.txn.read_inode(ino).map_err(failed)?;
        let inode = Inode::parse(&rec).map_err(|e| {
            Outcome::Skipped(Skip::Unmappable(format!(
                "inode {ino}: {}",
                ext4r::error::chain(&e)
            )))
        })?;
        if inode.links_count() == 0 {
            return Err(Outcome::Skipped(Skip::Vanished));
        }
        if !inode.is_reg() {
            return Err(Outcome::Skipped(Skip::NotRegular));
        }
        let flags = inode.flags();
        for (bit, why) in [
            (InodeFlags::IMMUTABLE, Skip::Immutable),
            (InodeFlags::APPEND, Skip::AppendOnly),
            (InodeFlags::INLINE_DATA, Skip::InlineData),
        ] {
            if flags.contains(bit) {
                return Err(Outcome::Skipped(why));
            }
        }
        let unmappable =
            |e: ext4r::Error| Outcome::Skipped(Skip::Unmappable(ext4r::error::chain(&e)));
        let runs = map::runs(&self.txn, ino, &inode, false).map_err(unmappable)?;
        let m = tree::mapping(&self.txn, ino, &inode).map_err(unmappable)?;
        if m.past_eof > 0 {
            return Err(Outcome::Skipped(Skip::Inconsistent(format!(
                "{} blocks mapped past its size",
                m.past_eof
            ))));
        }
        let fm = FileMap {
            ino,
            inode,
            runs,
            tree: m.blocks,
        };
        let want = self.sectors(&fm.runs, fm.tree.len() as u64, &fm.inode);
        let have = fm.inode.blocks_count(self.huge_file, num::sat_u32(self.bs));
        if want != Some(have) {
            return Err(Outcome::Skipped(Skip::Inconsistent(format!(
                "i_blocks says {have} sectors, its mapping {}",
                want.map_or_else(|| "too many".to_string(), |w| w.to_string())
            ))));
        }
        Ok(fm)
    }

    /// `i_blocks` in sectors for data `runs` and `tree` mapping blocks, as
    /// e2fsck counts it: each logical cluster mapped, each mapping block
    /// and an xattr block as a whole cluster.
    fn sectors(&self, runs: &[Run], tree: u64, inode: &Inode) -> Option<u64> {
        let r = self.ratio;
        let acl = u64::from(inode.i_file_acl_lo.get() != 0 || inode.l_i_file_acl_high.get() != 0);
        layout::clusters(runs, r)
            .checked_add(tree)?
            .checked_add(acl)?
            .checked_mul(r)?
            .checked_mul(self.bs / 512)
    }

    /// Takes free runs for `need` blocks (whole clusters), the first one
    /// long enough at or after `goal` else the longest ones: as few pieces
    /// as the free space allows. `None` when there is not that much free.
    /// Blocks freed by switches not yet committed are never handed out:
    /// the running transaction is committed first.
    pub(crate) fn alloc_pieces(
        &mut self,
        goal: u64,
        need: u64,
    ) -> crate::Result<Option<Vec<(u64, u64)>>> {
        self.before_alloc()?;
        for attempt in 0..2 {
            let mut pieces = Vec::new();
            let mut got = 0u64;
            while got < need {
                match self
                    .txn
                    .alloc_run(goal, need - got)
                    .map_err(|e| self.engine(e))?
                {
                    Some((s, n)) => {
                        pieces.push((s, n));
                        got += n - n % self.ratio;
                    }
                    None => break,
                }
            }
            if got < need {
                self.release(&pieces)?;
                return Ok(None);
            }
            if attempt == 0 && overlaps(&pieces, &self.freed) {
                self.release(&pieces)?;
                self.commit()?;
                continue;
            }
            return Ok(Some(self.trim(pieces, need)?));
        }
        Ok(None)
    }

    /// Commits the batch of switches before a new file takes blocks, when
    /// the batch is half the journal's share: a commit never carries
    /// blocks taken for a file not switched yet (a cut would leave them
    /// marked used and unowned), so it is made here or after a switch.
    pub(crate) fn before_alloc(&mut self) -> crate::Result<()> {
        let (meta, _) = self.txn.pending_sizes();
        if self.batch > 0 && meta * 2 >= self.meta_limit {
            self.commit()?;
        }
        Ok(())
    }

    /// Gives back what `pieces` hold beyond `need` blocks (the tail of the
    /// last one, a partial cluster at the end of the filesystem).
    pub(crate) fn trim(
        &mut self,
        pieces: Vec<(u64, u64)>,
        need: u64,
    ) -> crate::Result<Vec<(u64, u64)>> {
        let r = self.ratio;
        let mut left = need / r;
        let mut out = Vec::with_capacity(pieces.len());
        for (s, n) in pieces {
            let take = (n / r).min(left);
            left -= take;
            if take * r < n {
                self.txn
                    .free_blocks(s + take * r, n - take * r)
                    .map_err(|e| self.engine(e))?;
            }
            if take > 0 {
                out.push((s, take * r));
            }
        }
        Ok(out)
    }

    /// Frees blocks this transaction took and did not use. With no switch
    /// in the transaction they are all it holds: it is dropped whole, so
    /// that a run that moves nothing writes nothing.
    pub(crate) fn release(&mut self, pieces: &[(u64, u64)]) -> crate::Result<()> {
        if self.batch == 0 {
            self.txn.abandon();
            return Ok(());
        }
        for &(s, n) in pieces {
            self.txn.free_blocks(s, n).map_err(|e| self.engine(e))?;
        }
        Ok(())
    }

    /// Copies what `moves` say, in bounded chunks written to their new
    /// blocks at once. Returns false when `deadline` passed first (what
    /// was copied is in free blocks: nothing refers to it).
    pub(crate) fn copy(
        &mut self,
        moves: &[Move],
        deadline: Option<Instant>,
    ) -> crate::Result<bool> {
        let bs = self.bs;
        let chunk = (COPY_CHUNK_BYTES / bs).max(1);
        let dev = std::sync::Arc::clone(&self.dev);
        let mut buf = std::mem::take(&mut self.buf);
        let mut result = Ok(true);
        'moves: for m in moves.iter().filter(|m| !m.unwritten) {
            let mut done = 0u64;
            while done < m.len {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    result = Ok(false);
                    break 'moves;
                }
                let n = chunk.min(m.len - done);
                buf.resize(num::index(n * bs), 0);
                if let Err(e) = dev.read_at(&mut buf, (m.from + done) * bs) {
                    result = Err(self.engine(e));
                    break 'moves;
                }
                for (k, b) in buf.chunks_exact(num::index(bs)).enumerate() {
                    if let Err(e) = self.txn.write_data(m.to + done + k as u64, b.to_vec()) {
                        result = Err(self.engine(e));
                        break 'moves;
                    }
                }
                if let Err(e) = self.txn.write_data_early() {
                    result = Err(self.engine(e));
                    break 'moves;
                }
                done += n;
            }
        }
        self.buf = buf;
        result
    }

    /// Switches `fm` to `new_runs` (its data already copied there) in the
    /// running transaction: fresh mapping blocks near `goal` (none inside
    /// `avoid`), `i_blocks` and `ctime`, the data blocks of `moved` (the
    /// old places of what moved) and the old mapping blocks freed. With
    /// `to_extents` a block-mapped file gets an extent tree. Commits when
    /// the batch is full, or at once without a journal. Returns the
    /// extents after.
    ///
    /// On an error the running transaction is abandoned: the files switched
    /// in it since the last commit are back as they were (the message says
    /// how many).
    pub(crate) fn switch(
        &mut self,
        fm: &FileMap,
        new_runs: &[Run],
        moved: &[Run],
        goal: u64,
        to_extents: bool,
        avoid: &[(u64, u64)],
    ) -> crate::Result<u64> {
        let extents = fm.extent_mapped() || to_extents;
        let est = tree_estimate(new_runs, extents, self.bs);
        // Refuse before changing anything when the mapping blocks cannot
        // be had outside `avoid`.
        let mut free = self.txn.groups().free_blocks();
        for &(s, n) in avoid {
            let used: u64 = ext4r_txn::alloc::used_runs(&self.txn, s, s + n - 1)
                .map_err(|e| self.engine(e))?
                .iter()
                .map(|&(a, b)| b - a)
                .sum();
            free = free.saturating_sub(n - used);
        }
        if free < est * self.ratio {
            // Nothing changed yet: the caller gives its pieces back.
            return Err(crate::Error::InvalidArgument(format!(
                "inode {}: no room for the {est} mapping blocks its new layout needs",
                fm.ino
            )));
        }

        match self.switch_now(fm, new_runs, moved, goal, extents, avoid) {
            Ok(()) => {}
            Err(e) => {
                let rolled = self.batch;
                self.txn.abandon();
                self.freed.clear();
                self.batch = 0;
                let e = self.engine(e);
                return Err(if rolled > 0 {
                    crate::Error::InvalidArgument(format!(
                        "{} (the {rolled} files moved since the last commit are back where \
                         they were)",
                        ext4r::error::chain(&e)
                    ))
                } else {
                    e
                });
            }
        }
        self.batch += 1;
        let (meta, _) = self.txn.pending_sizes();
        if !self.journaled || meta >= self.meta_limit {
            self.commit()?;
        }
        // Extents as the read path (and -c on the image) counts them.
        Ok(new_runs.len() as u64)
    }

    fn switch_now(
        &mut self,
        fm: &FileMap,
        new_runs: &[Run],
        moved: &[Run],
        goal: u64,
        extents: bool,
        avoid: &[(u64, u64)],
    ) -> ext4r::Result<()> {
        let ino = fm.ino;
        let cur = Inode::parse(&self.txn.read_inode(ino)?)
            .map_err(|e| ext4r::Error::corrupt(format!("inode {ino}"), e))?;
        if cur != fm.inode {
            return Err(ext4r::Error::InvalidArgument(format!(
                "inode {ino} changed since it was read"
            )));
        }
        let mut inode = fm.inode;
        // An empty mapping, so that the editor takes fresh blocks for the
        // new one: the old tree is never rewritten in place, and without a
        // journal a cut before the inode is written leaves it intact.
        if extents {
            let mut f = inode.flags();
            f.insert(InodeFlags::EXTENTS);
            inode.set_flags(f);
            let mut root = [0u8; 60];
            write_leaf(&mut root, &[])
                .map_err(|e| ext4r::Error::corrupt(format!("inode {ino}"), e))?;
            inode.i_block = root;
        } else {
            inode.set_block_words(&[0; 15]);
        }
        // The editor takes mapping blocks first-free from the goal: what
        // is free in `avoid` is held for the moment, in this transaction
        // only, so that none lands there.
        let mut held = Vec::new();
        for &(s, n) in avoid {
            let mut b = s;
            for (us, ue) in ext4r_txn::alloc::used_runs(&self.txn, s, s + n - 1)? {
                if us > b {
                    held.push((b, us - b));
                }
                b = ue;
            }
            if b < s + n {
                held.push((b, s + n - b));
            }
        }
        for &(s, n) in &held {
            self.txn.take_blocks(s, n)?;
        }
        let tree = map::store(&mut self.txn, ino, &mut inode, new_runs, goal)?;
        for &(s, n) in &held {
            self.txn.free_blocks(s, n)?;
        }
        let sectors = self.sectors(new_runs, tree, &inode).ok_or_else(|| {
            ext4r::Error::InvalidArgument(format!("inode {ino}: block count overflows"))
        })?;
        inode
            .set_blocks_count(sectors, self.huge_file, num::sat_u32(self.bs))
            .map_err(|e| ext4r::Error::corrupt(format!("inode {ino}"), e))?;
        inode.set_ctime(self.now);
        let rec = self.txn.inode_mut(ino)?;
        inode
            .write(rec)
            .map_err(|e| ext4r::Error::corrupt(format!("inode {ino}"), e))?;
        for r in moved {
            self.txn.free_blocks(r.physical, r.len)?;
            self.freed.push((r.physical, r.len));
        }
        for &b in &fm.tree {
            self.txn.free_blocks(b, 1)?;
            self.freed.push((b, 1));
        }
        Ok(())
    }

    /// Moves the logical ranges `moving` of `fm` (whole runs or parts of
    /// them, by logical block) into `pieces`, then switches the whole
    /// mapping. Returns the extents after, or `None` when the deadline
    /// passed during the copy (nothing changed; the pieces are given back).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn relocate(
        &mut self,
        fm: &FileMap,
        moving: &[Run],
        pieces: &[(u64, u64)],
        goal: u64,
        to_extents: bool,
        avoid: &[(u64, u64)],
        deadline: Option<Instant>,
    ) -> crate::Result<Option<u64>> {
        let Some((placed, moves)) = layout::lay_out(moving, self.ratio, pieces) else {
            self.release(pieces)?;
            return Err(crate::Error::InvalidArgument(format!(
                "inode {}: the space taken does not hold its blocks",
                fm.ino
            )));
        };
        if !self.copy(&moves, deadline)? {
            self.release(pieces)?;
            return Ok(None);
        }
        let new_runs = layout::replace(&fm.runs, &placed);
        let batch = self.batch;
        match self.switch(fm, &new_runs, moving, goal, to_extents, avoid) {
            Ok(n) => Ok(Some(n)),
            Err(e) => {
                // Refused before changing anything (the batch is intact and
                // the transaction not abandoned): the pieces go back.
                if !self.poisoned && self.batch == batch && self.txn.is_dirty() {
                    self.release(pieces)?;
                }
                Err(e)
            }
        }
    }

    /// The runs `fm` would have in `pieces`, without moving anything.
    pub(crate) fn planned_runs(&self, fm: &FileMap, pieces: &[(u64, u64)]) -> Option<Vec<Run>> {
        layout::lay_out(&fm.runs, self.ratio, pieces).map(|(r, _)| r)
    }

    /// Blocks (whole clusters) `runs` need.
    pub(crate) fn need(&self, runs: &[Run]) -> u64 {
        layout::clusters(runs, self.ratio) * self.ratio
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(logical: u64, len: u64) -> Run {
        Run {
            logical,
            physical: 1000 + logical,
            len,
            unwritten: false,
        }
    }

    #[test]
    fn tree_estimates_cover_the_editor() {
        // Up to four extents fit in the inode.
        let four: Vec<Run> = (0..4).map(|i| run(i * 10, 1)).collect();
        assert_eq!(tree_estimate(&four, true, 4096), 0);
        let many: Vec<Run> = (0..1000).map(|i| run(i * 10, 1)).collect();
        // 340 per 4 KiB leaf: 3 leaves, their index fits in the root.
        assert_eq!(tree_estimate(&many, true, 4096), 3);
        assert_eq!(tree_estimate(&[run(0, 12)], false, 4096), 0);
        assert!(tree_estimate(&[run(0, 2000)], false, 4096) >= 2);
        assert!(overlaps(&[(10, 5)], &[(14, 1)]));
        assert!(!overlaps(&[(10, 5)], &[(15, 1), (0, 10)]));
    }
}
