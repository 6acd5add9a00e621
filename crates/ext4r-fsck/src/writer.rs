//! Applying a batch of fixes with every affected checksum recomputed.
//!
//! A round of repair is: check, collect the fixes the problems carry,
//! apply them all, then check again. The batch is one in-place
//! transaction of the write layer, opened when the batch starts: each fix
//! edits the inode records, blocks, descriptors and bitmaps it changes in
//! that transaction (two fixes to one inode make one write), and the
//! commit stamps every checksum and writes in its safe order. Fixes are
//! idempotent and computed from what the check saw, so a round that is cut
//! short leaves an image the next run repairs the same way.

mod dirs;
mod resize;
mod space;
mod truncate;
mod apply {
    //! Applying one fix to the batch, by what it changes.
    mod dir;
    mod group;
    mod inline;
    mod inode;
    mod journal;
    mod map;
    mod space;
    mod superblock;
    pub(super) use superblock::{edit_superblock, is_superblock_fix};
}

use dirs::{add_tail, collapse_dir};
use space::bits_to_bytes;

use std::collections::BTreeMap;

use ext4r::fs::Filesystem;
use ext4r::Result;
use ext4r_format::features::{Incompat, RoCompat};
use ext4r_format::group_desc::{GroupDesc, BG_BLOCK_UNINIT, BG_INODE_UNINIT};
use ext4r_format::inode::Inode;
use ext4r_format::num;
use ext4r_format::superblock::Superblock;
use ext4r_format::{GroupNr, InodeNr};
use ext4r_txn::bitmap::Bitmap;
use ext4r_txn::csum::BlockKind;
use ext4r_txn::txn::{Commit, Transaction};
use ext4r_txn::volume::{Volume, VolumeOptions};

use crate::fix::{Fix, Owner};
use crate::guard;

/// Writes `fixes` to the filesystem's device.
///
/// # Errors
/// I/O errors, or corrupt structures that stand in the way (reported with
/// their location).
pub fn apply(fs: &Filesystem, fixes: &[Fix]) -> Result<usize> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_secs() as i64);
    apply_at(fs, fixes, now)?;
    Ok(fixes.len())
}

/// [`apply`] with the check's clock: deletion times and the superblock's
/// write time are `now`, as e2fsck stamps them with the time it started
/// (a later clock would put the write time in the future of the next
/// round's check). Returns the superblock as the batch left it on the
/// device, or `None` when a quota file was rewritten after the batch
/// (through the engine's own transaction, which writes it again).
pub(crate) fn apply_at(fs: &Filesystem, fixes: &[Fix], now: i64) -> Result<Option<Superblock>> {
    let mut w = Writer::new(fs, now, volume_superblock(fs.superblock(), fixes))?;
    let mut quota = Vec::new();
    let fixes = clones_first(fixes);
    for f in fixes.iter() {
        match f {
            // The engine writes a quota file whole (allocating its
            // blocks), once what the batch changes is on disk.
            Fix::UpdateQuota(qtype, dquots) => quota.push((usize::from(*qtype), dquots)),
            _ => w.add(f)?,
        }
    }
    let sb = w.flush()?;
    if quota.is_empty() {
        return Ok(Some(sb));
    }
    for (qtype, dquots) in quota {
        ext4r::quota_write::rewrite_quota_file(fs.device_shared(), qtype, dquots, now)?;
    }
    Ok(None)
}

/// The batch with pass 1D's copies made before the first fix of a
/// directory block, and each such fix of an inode that gets a copy of
/// that block moved to the copy.
///
/// The check finds blocks claimed twice in pass 5, after pass 2 asked to
/// salvage or edit a directory block; e2fsck clones them in pass 1D,
/// before its pass 2 reads the directory. Made in the order found, a
/// salvage of a directory block that is also a file's data would rewrite
/// the file's data in place and the file's copy would be taken from the
/// salvaged block. So the copies are taken first, from the block as the
/// passes before pass 2 left it, and the directory's fixes go to
/// whichever block is the directory's once the copies are made: the
/// original when the file got the copy, the copy when the directory got
/// it. A copy of an indirect or index block takes no directory fix along
/// (f_dup3: a directory's indirect block that is also its block #12 is
/// copied as it was, and the salvage of block #12 stays on the original,
/// as e2fsck leaves it).
fn clones_first(fixes: &[Fix]) -> std::borrow::Cow<'_, [Fix]> {
    use std::borrow::Cow;
    // (inode, old, len, new) of every copy.
    let moved: Vec<(u32, u64, u64, u64)> = fixes
        .iter()
        .filter_map(|f| match f {
            Fix::CloneBlocks(ino, _, copies) => Some(
                copies
                    .iter()
                    .filter(|cp| !cp.node)
                    .map(move |cp| (*ino, cp.old, cp.len, cp.new)),
            ),
            _ => None,
        })
        .flatten()
        .collect();
    let Some(first) = fixes.iter().position(dir_block_fix) else {
        return Cow::Borrowed(fixes);
    };
    if !fixes.iter().any(|f| matches!(f, Fix::CloneBlocks(..))) {
        return Cow::Borrowed(fixes);
    }
    let clones = fixes.iter().filter(|f| matches!(f, Fix::CloneBlocks(..)));
    let rest = fixes[first..]
        .iter()
        .filter(|f| !matches!(f, Fix::CloneBlocks(..)))
        .map(|f| retarget(f, &moved));
    let out: Vec<Fix> = fixes[..first]
        .iter()
        .filter(|f| !matches!(f, Fix::CloneBlocks(..)))
        .cloned()
        .chain(clones.cloned())
        .chain(rest)
        .collect();
    Cow::Owned(out)
}

/// Whether `f` (or one of the fixes it groups) edits a directory block
/// named by its physical number.
fn dir_block_fix(f: &Fix) -> bool {
    match f {
        Fix::Each(inner) => inner.iter().any(dir_block_fix),
        _ => f.dir_block().is_some(),
    }
}

/// `f` with its directory block moved to the copy its owner gets, if
/// any (see [`clones_first`]).
fn retarget(f: &Fix, moved: &[(u32, u64, u64, u64)]) -> Fix {
    if let Fix::Each(inner) = f {
        return Fix::Each(inner.iter().map(|g| retarget(g, moved)).collect());
    }
    let Some((b, o)) = f.dir_block() else {
        return f.clone();
    };
    let Some(to) = moved
        .iter()
        .find(|&&(ino, old, len, _)| ino == o.ino && b >= old && b - old < len)
        .map(|&(_, old, _, new)| new + (b - old))
    else {
        return f.clone();
    };
    let mut g = f.clone();
    if let Some((b, _)) = g.dir_block_mut() {
        *b = to;
    }
    g
}

/// The superblock the batch's transaction is opened with: the
/// filesystem's, with the batch's superblock fixes made. Those change
/// what the volume is (its geometry, its checksums, its descriptors'
/// size), which every block and inode staged after them is stamped and
/// placed by; the free counts and the rest the other fixes change are
/// taken at the flush from the superblock as the batch edited it in order.
fn volume_superblock(base: &Superblock, fixes: &[Fix]) -> Superblock {
    fn walk(sb: &mut Superblock, fixes: &[Fix]) {
        for f in fixes {
            match f {
                Fix::Each(inner) => walk(sb, inner),
                f if apply::is_superblock_fix(f) => {
                    apply::edit_superblock(sb, f);
                }
                _ => {}
            }
        }
    }
    let mut sb = base.clone();
    walk(&mut sb, fixes);
    sb
}

/// The in-place transaction a checker's repair writes through: over the
/// filesystem as the check read it (its descriptors) and superblock `sb`,
/// which may build on what fails its checksum.
fn open_txn(fs: &Filesystem, now: i64, sb: Superblock) -> Result<Transaction<Volume>> {
    let geo = fs.geometry();
    let descs = (0..geo.group_count)
        .map(|g| fs.group_desc(GroupNr(g)).copied())
        .collect::<Result<Vec<GroupDesc>>>()?;
    let mut opts = VolumeOptions::default();
    opts.now = Some(now);
    let vol = Volume::open_checked(fs.device_shared(), sb, descs, opts)?;
    let mut txn = Transaction::owned(vol);
    // A block fixed in one field may still be broken in another (a later
    // round repairs it): it is written without its checksum rather than
    // not at all.
    txn.tolerate_unstampable();
    Ok(txn)
}

/// Extent entries to remove, per (inode, node block), with the owner.
type ExtentRemovals = BTreeMap<(u32, Option<u64>), Vec<(usize, Owner)>>;

/// One batch of fixes, staged in the one transaction that writes them.
struct Writer<'a> {
    fs: &'a Filesystem,
    /// Every inode record, block and descriptor the batch changes, and
    /// at the flush its bitmaps and superblock: stamped and written in
    /// its safe order by the commit.
    txn: Transaction<Volume>,
    /// Extent entries to remove per (inode, node): applied at the end,
    /// highest index first, so indexes stay valid.
    extent_removals: ExtentRemovals,
    /// The superblock as the batch's fixes edit it, in their order.
    sb: Superblock,
    sb_dirty: bool,
    /// Deletion time for cleared inodes.
    now: u32,
    /// The bitmaps, by (group, block bitmap?), taken into the
    /// transaction as the device held them (or replaced whole).
    maps_taken: std::collections::BTreeSet<(u32, bool)>,
    /// Orphans to truncate to their size, once the rest of the batch is
    /// in the transaction.
    truncates: Vec<u32>,
    /// Metadata blocks a fix rewrites as metadata (the resize inode's
    /// reserved GDT blocks), exempt from the guard.
    meta_writes: std::collections::BTreeSet<u64>,
    /// The filesystem's own metadata (see [`guard`]), found on the first
    /// block a fix changes.
    meta: Option<Vec<(u64, u64)>>,
    /// Blocks of the filesystem's own metadata that fixes changed as
    /// something else (a directory or map block found there): kept out of
    /// the transaction, never written, but seen by later fixes of the
    /// batch as they left them.
    withheld: BTreeMap<u64, (Vec<u8>, BlockKind)>,
    /// The lost+found this batch made (not on the device yet): where the
    /// batch's reconnections go.
    made_lost_found: Option<ext4r::fs::InodeInfo>,
    /// Where this batch's reconnections go, found at the first (the
    /// fixes that make or unlink lost+found come before them).
    reconnect_to: Option<Option<ext4r::fs::InodeInfo>>,
}

impl<'a> Writer<'a> {
    /// A batch over `fs`, its transaction opened on `sb` (see
    /// [`volume_superblock`]).
    fn new(fs: &'a Filesystem, now: i64, sb: Superblock) -> Result<Self> {
        let txn = open_txn(fs, now, sb)?;
        Ok(Writer {
            fs,
            txn,
            extent_removals: BTreeMap::new(),
            sb: fs.superblock().clone(),
            sb_dirty: false,
            now: num::sat_u32(now.clamp(1, i64::from(u32::MAX))),
            maps_taken: std::collections::BTreeSet::new(),
            meta_writes: std::collections::BTreeSet::new(),
            truncates: Vec::new(),
            meta: None,
            withheld: BTreeMap::new(),
            made_lost_found: None,
            reconnect_to: None,
        })
    }

    fn csum(&self) -> bool {
        self.sb.has_ro_compat(RoCompat::METADATA_CSUM)
    }

    /// The file type byte of a directory entry naming a directory.
    fn dir_ft(&self) -> u8 {
        if self.sb.has_incompat(Incompat::FILETYPE) {
            ext4r_format::dir::ft::DIR
        } else {
            0
        }
    }

    /// Inode `ino`'s record as the batch leaves it, staged in the
    /// transaction: taken on first use from the inode table the check
    /// read (not where a relocation in the batch moves it).
    fn inode(&mut self, ino: u32) -> Result<&mut Vec<u8>> {
        if !self.txn.has_inode(ino) {
            let rec = self.fs.inode_record(InodeNr(ino))?;
            self.txn.write_inode(ino, rec)?;
        }
        self.txn.inode_mut(ino)
    }

    /// e2fsck's `move_quota_inode`: the inode written anew at the reserved
    /// number as `ext2fs_write_new_inode` writes one (the first 128 bytes
    /// kept, the rest zeroed but for `i_extra_isize` and a creation time),
    /// the name unlinked, the old inode's first 128 bytes zeroed and its
    /// number freed. Without a name to unlink, e2fsck stops short of
    /// pointing the superblock at the new inode and hides it again at
    /// every run; the move is completed here all the same.
    fn hide_quota(&mut self, h: &crate::fix::plan::HideQuota) -> Result<()> {
        use ext4r_format::inode::InodeFlags;
        let old = self.inode(h.from)?.clone();
        let extents = self.sb.has_incompat(Incompat::EXTENTS);
        let now = self.now;
        let to = self.inode(h.to)?;
        to.fill(0);
        let n = to.len().min(old.len()).min(128);
        to[..n].copy_from_slice(&old[..n]);
        if to.len() > 128 {
            // sizeof(struct ext2_inode_large) - 128.
            to[0x80..0x82].copy_from_slice(&32u16.to_le_bytes());
            // i_crtime (the copy has none: its extra fields are gone).
            if let Some(x) = to.get_mut(0x90..0x94) {
                x.copy_from_slice(&now.to_le_bytes());
            }
        }
        let mut flags = InodeFlags::IMMUTABLE.bits();
        if extents {
            flags |= InodeFlags::EXTENTS.bits();
        }
        self.edit_inode(h.to, |i| {
            i.i_links_count.set(1);
            i.i_mode.set(0o100_600);
            i.i_flags.set(flags);
        })?;
        if let Some((b, off, owner)) = h.entry {
            self.add(&Fix::DirEntryClear(b, off, owner))?;
        }
        match h.qtype {
            0 => self.sb.s_usr_quota_inum.set(h.to),
            _ => self.sb.s_grp_quota_inum.set(h.to),
        }
        self.sb_dirty = true;
        let from = self.inode(h.from)?;
        let n = from.len().min(128);
        from[..n].fill(0);
        self.free_inode(h.from, false)
    }

    fn edit_inode(&mut self, ino: u32, f: impl FnOnce(&mut Inode)) -> Result<()> {
        let rec = self.inode(ino)?;
        if let Ok(mut i) = Inode::parse(rec) {
            f(&mut i);
            let _ = i.write(rec);
        }
        Ok(())
    }

    /// Whether block `b` is the filesystem's own metadata that no fix of
    /// this batch may write (see [`guard`]).
    fn guarded(&mut self, b: u64) -> bool {
        let fs = self.fs;
        let meta = self.meta.get_or_insert_with(|| guard::metadata_ranges(fs));
        guard::covers(meta, b) && !self.meta_writes.contains(&b)
    }

    /// Block `b` as the batch leaves it, to change: staged in the
    /// transaction with the checksum kind it was first taken with, read
    /// on first use from the device as it is (a fix rewrites what fails
    /// its checksum).
    fn block(&mut self, b: u64, kind: BlockKind) -> Result<&mut Vec<u8>> {
        if let Some(k) = self.txn.staged_kind(b) {
            return self.txn.block_mut(b, k);
        }
        if !self.withheld.contains_key(&b) {
            let mut buf = vec![0u8; self.fs.block_size() as usize];
            self.fs
                .device()
                .read_at(&mut buf, b * u64::from(self.fs.block_size()))?;
            if !self.guarded(b) {
                self.txn.write_block(b, kind, buf)?;
                return self.txn.block_mut(b, kind);
            }
            self.withheld.insert(b, (buf, kind));
        }
        Ok(&mut self
            .withheld
            .entry(b)
            .or_insert_with(|| (Vec::new(), kind))
            .0)
    }

    /// Replaces block `b` whole, as metadata of kind `kind`.
    fn put_block(&mut self, b: u64, buf: Vec<u8>, kind: BlockKind) -> Result<()> {
        if self.guarded(b) {
            self.withheld.insert(b, (buf, kind));
            return Ok(());
        }
        self.withheld.remove(&b);
        self.txn.write_block(b, kind, buf)
    }

    /// Block `b`, already taken into the batch, gets its checksum as kind
    /// `kind`.
    fn set_kind(&mut self, b: u64, kind: BlockKind) -> Result<()> {
        if let Some(e) = self.withheld.get_mut(&b) {
            e.1 = kind;
        } else if self.txn.staged_kind(b).is_some() {
            self.txn.block_mut(b, kind)?;
        }
        Ok(())
    }

    /// Block `b` is rewritten as metadata by this batch: exempt from the
    /// guard, with what earlier fixes of the batch changed in it.
    fn allow_meta_write(&mut self, b: u64) -> Result<()> {
        self.meta_writes.insert(b);
        if let Some((buf, kind)) = self.withheld.remove(&b) {
            self.txn.write_block(b, kind, buf)?;
        }
        Ok(())
    }

    /// A block as this batch leaves it, without taking it into the batch.
    fn peek(&self, b: u64) -> Result<Vec<u8>> {
        if self.txn.staged_kind(b).is_some() {
            return self.txn.read_block(b);
        }
        if let Some((buf, _)) = self.withheld.get(&b) {
            return Ok(buf.clone());
        }
        let mut buf = vec![0u8; self.fs.block_size() as usize];
        self.fs
            .device()
            .read_at(&mut buf, b * u64::from(self.fs.block_size()))?;
        Ok(buf)
    }

    /// Group `g`'s descriptor, to change in the transaction.
    fn desc(&mut self, g: u32) -> Result<&mut GroupDesc> {
        self.txn.desc_mut(g)
    }

    /// Takes one fix into the batch; each kind of fix is applied by the
    /// part of the writer for what it changes (`apply/`).
    fn add(&mut self, f: &Fix) -> Result<()> {
        match f {
            Fix::InodeChecksum(..)
            | Fix::InodeLinks(..)
            | Fix::InodeBlocks(..)
            | Fix::InodeSize(..)
            | Fix::InodeClearDtime(..)
            | Fix::InodeClearFileAcl(..)
            | Fix::InodeClearFileAclHigh(..)
            | Fix::InodeBlockSlot(..)
            | Fix::ClearInode(..)
            | Fix::InodeExtraIsize(..)
            | Fix::ClearIbodyXattrs(..)
            | Fix::IbodyXattrHashes(..)
            | Fix::CollapseDir(..)
            | Fix::ClearIndexFlag(..)
            | Fix::EaInodeRefCount(..)
            | Fix::InodeClearEpoch(..)
            | Fix::InodeZeroByte(..)
            | Fix::InodeClearFaddr(..)
            | Fix::InodeClearBlocksHigh(..)
            | Fix::InodeClearFlags(..)
            | Fix::InodeSetFlags(..)
            | Fix::InodeMode(..)
            | Fix::ZeroInode(..)
            | Fix::InlineTruncate(..) => self.add_inode_field(f),
            Fix::DirBlockChecksum(..)
            | Fix::DirEntryClear(..)
            | Fix::DirEntryRename(..)
            | Fix::DirEntryFiletype(..)
            | Fix::DirMakeDot(..)
            | Fix::DirMakeDotDot(..)
            | Fix::DirZeroByte(..)
            | Fix::DirSalvage(..)
            | Fix::DirAddTail(..)
            | Fix::DirEntryInode(..)
            | Fix::DirNameFix(..) => self.add_dir_block(f),
            Fix::InlineParent(..)
            | Fix::InlineEntryClear(..)
            | Fix::InlineEntryFiletype(..)
            | Fix::InlineNameFix(..)
            | Fix::InlineSalvage(..)
            | Fix::InlineDirSize(..) => self.add_inline_dir(f),
            Fix::ExtentBlockChecksum(..)
            | Fix::ExtentRemove(..)
            | Fix::ExtentIndexStart(..)
            | Fix::RebuildExtents(..)
            | Fix::ExtentsFromMap(..)
            | Fix::ExtentWritten(..)
            | Fix::ExtentDepth(..)
            | Fix::IndirectEntry(..)
            | Fix::ReservedGdtEntry(..) => self.add_block_map(f),
            Fix::GroupFreeBlocks(..)
            | Fix::GroupFreeInodes(..)
            | Fix::GroupUsedDirs(..)
            | Fix::GroupDescChecksum(..)
            | Fix::GroupDescFlags(..)
            | Fix::BlockBitmap(..)
            | Fix::InodeBitmap(..)
            | Fix::Relocate(..)
            | Fix::RelocateFrom(..) => self.add_group(f),
            // The same list as `apply::is_superblock_fix`: kept here so
            // that the match stays exhaustive (a new fix must be routed).
            Fix::SetIncompat(..)
            | Fix::SetRoCompat(..)
            | Fix::ClearIncompat(..)
            | Fix::SuperblockCounts(..)
            | Fix::SuperFreeBlocks(..)
            | Fix::SuperFreeInodes(..)
            | Fix::Superblock(..)
            | Fix::SuperExtraIsize(..)
            | Fix::ClearQuotaInode(..)
            | Fix::RestorePrimary
            | Fix::ClearLastOrphan
            | Fix::SetLargeDir
            | Fix::SetLargeFile
            | Fix::ClearOrphanPresent
            | Fix::DropResizeFeature => {
                debug_assert!(apply::is_superblock_fix(f));
                self.add_superblock(f)
            }
            Fix::DeleteJournal
            | Fix::ResetJournalSuper(..)
            | Fix::JournalInum(..)
            | Fix::RestoreJournalInode(..)
            | Fix::ClearV2JournalFields(..)
            | Fix::MoveJournal(..) => self.add_journal(f),
            Fix::XattrBlockChecksum(..)
            | Fix::XattrRefcount(..)
            | Fix::Each(..)
            | Fix::CloneBlocks(..)
            | Fix::FreeBlocks(..)
            | Fix::FreeInode(..)
            | Fix::Reconnect(..)
            | Fix::MakeLostFound(..)
            | Fix::DirBlock0(..)
            | Fix::DirBlockAt(..)
            | Fix::ExpandDir(..)
            | Fix::RehashDir(..)
            | Fix::MakeRoot(..)
            | Fix::HideQuota(..)
            | Fix::RecreateResizeInode(..)
            | Fix::ResetMmp(..)
            | Fix::UpdateQuota(..)
            | Fix::NewOrphanFile(..)
            | Fix::OrphanBlockClear(..)
            | Fix::TruncateOrphan(..) => self.add_space(f),
        }
    }

    /// Completes the batch's transaction (the extent entries removed, the
    /// bitmaps, the orphans truncated, the superblock as the fixes left
    /// it) and commits it in place: the write layer stamps the checksum
    /// of every inode record, block, bitmap, descriptor and the
    /// superblock, and writes them in its safe order.
    fn flush(mut self) -> Result<Superblock> {
        self.remove_extents()?;
        let mut txn = self.txn;
        if self.sb_dirty {
            // The counts as the batch left them, for the bitmaps and
            // truncations below to count on from (the commit writes the
            // group table's counts into the superblock).
            let sb = &self.sb;
            txn.set_free_counts(
                sb.free_blocks_count(),
                u64::from(sb.s_free_inodes_count.get()),
            );
        }
        if !self.truncates.is_empty() {
            let meta = guard::metadata_ranges(self.fs);
            for ino in std::mem::take(&mut self.truncates) {
                // A mapping found damaged on the way is left whole (the
                // check judges it): its changes are undone.
                txn.savepoint();
                match truncate::truncate(&mut txn, ino, &meta) {
                    Err(ext4r::Error::Corrupt { .. } | ext4r::Error::NoSpace) => {
                        txn.rollback_to_savepoint()
                    }
                    r => {
                        r?;
                        txn.release_savepoint();
                    }
                }
            }
        }
        if self.sb_dirty {
            txn.set_superblock(self.sb);
        }
        txn.commit(Commit::InPlace)?;
        Ok(txn.superblock().clone())
    }
}

/// Writes `sb` as the superblock of `fs` (the check's last word: state,
/// mount count, check time), through the write layer: a transaction of
/// the superblock alone (opened on `sb`, whose free counts it keeps).
pub(crate) fn write_superblock(fs: &Filesystem, sb: Superblock, now: i64) -> Result<()> {
    let mut txn = open_txn(fs, now, sb.clone())?;
    txn.set_superblock(sb);
    txn.commit(Commit::InPlace)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fix::plan::{BlockCopy, PtrAt};

    fn clone_of(ino: u32, old: u64, new: u64, node: bool) -> Fix {
        let copy = BlockCopy {
            at: PtrAt::InodeSlot(0),
            old,
            new,
            len: 1,
            node,
        };
        Fix::CloneBlocks(ino, Owner::new(ino, 1), vec![copy])
    }

    #[test]
    fn copies_go_before_directory_fixes_and_take_the_directory_along() {
        let dir = Owner::new(24752, 7);
        let salvage = Fix::DirSalvage(6398, 0, None, dir);
        let dot = Fix::DirMakeDot(6398, 24752, dir);
        let links = Fix::InodeLinks(24577, 21);
        // The file gets the copy: the directory's fixes stay on 6398,
        // made after the copy was taken.
        let fixes = vec![
            links.clone(),
            salvage.clone(),
            Fix::Each(vec![dot.clone()]),
            clone_of(2383, 6398, 944, false),
        ];
        assert_eq!(
            clones_first(&fixes).into_owned(),
            vec![
                links.clone(),
                clone_of(2383, 6398, 944, false),
                salvage.clone(),
                Fix::Each(vec![dot.clone()]),
            ]
        );
        // The directory gets the copy: its fixes follow it there; another
        // directory's fix of a block the copy does not cover stays.
        let other = Fix::DirEntryClear(6399, 12, dir);
        let fixes = vec![
            salvage,
            other.clone(),
            Fix::Each(vec![dot]),
            clone_of(24752, 6398, 944, false),
        ];
        assert_eq!(
            clones_first(&fixes).into_owned(),
            vec![
                clone_of(24752, 6398, 944, false),
                Fix::DirSalvage(944, 0, None, dir),
                other,
                Fix::Each(vec![Fix::DirMakeDot(944, 24752, dir)]),
            ]
        );
        // A copy of the directory's indirect block (that is also its
        // data, f_dup3) is taken first, and the fix stays on the original.
        let salvage = Fix::DirSalvage(24, 0, None, dir);
        let fixes = vec![salvage.clone(), clone_of(24752, 24, 42, true)];
        assert_eq!(
            clones_first(&fixes).into_owned(),
            vec![clone_of(24752, 24, 42, true), salvage]
        );
        // Without a copy or without a directory fix, the batch is as given.
        let fixes = vec![links.clone(), Fix::DirEntryClear(6399, 12, dir)];
        assert!(matches!(
            clones_first(&fixes),
            std::borrow::Cow::Borrowed(_)
        ));
        let fixes = vec![clone_of(2383, 6398, 944, false), links];
        assert!(matches!(
            clones_first(&fixes),
            std::borrow::Cow::Borrowed(_)
        ));
    }
}
