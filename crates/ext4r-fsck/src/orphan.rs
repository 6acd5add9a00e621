//! Releasing orphan inodes before the check, as e2fsck does at the start
//! of a repair run (its `release_orphan_inodes`): every inode on the
//! superblock's orphan list (linked through `i_dtime`) and in the orphan
//! file is finished off the way the kernel would have. A deleted one
//! (no links) has its blocks and its inode freed in the bitmaps and its
//! deletion time set; one still linked (a truncate in progress) leaves
//! the list with its truncation finished: the blocks past `i_size` freed
//! (see `writer/truncate.rs`).
//!
//! Nothing is done on a filesystem marked with errors (the list cannot be
//! trusted; the full check deals with the inodes), except forgetting the
//! list head, as e2fsck.

use crate::codes::ProblemCode;
use std::collections::HashSet;

use ext4r::fs::Filesystem;
use ext4r_format::features::{Compat, RoCompat};
use ext4r_format::inode::Inode;
use ext4r_format::orphan::ORPHAN_BLOCK_MAGIC;
use ext4r_format::superblock::STATE_ERROR;
use ext4r_format::InodeNr;

use crate::fix::Fix;
use crate::problem::{Problem, Severity, Subject};

/// Bytes of an orphan file block's tail (magic, checksum).
const TAIL: usize = 8;

/// What releasing the orphans does: the fixes, the inodes released, and
/// what e2fsck says while doing it (its PR_0_ORPHAN_* messages).
#[derive(Default)]
pub(crate) struct Released {
    pub fixes: Vec<Fix>,
    pub inodes: Vec<u32>,
    pub said: Vec<Problem>,
}

impl Released {
    fn say(&mut self, code: ProblemCode, subject: Subject, message: String) {
        self.said.push(Problem {
            pass: 0,
            code,
            severity: Severity::Harmless,
            message,
            subject,
            fix: None,
            latch: None,
        });
    }
}

/// Plans the release of the orphans.
pub(crate) fn plan(fs: &Filesystem) -> Released {
    let sb = fs.superblock();
    let head = sb.s_last_orphan.get();
    let present = sb.has_ro_compat(RoCompat::ORPHAN_PRESENT);
    let mut r = Released::default();
    if head == 0 && !present {
        return r;
    }
    if head != 0 {
        r.fixes.push(Fix::ClearLastOrphan);
    }
    if sb.s_state.get() & STATE_ERROR != 0 {
        return r;
    }
    let first = sb.first_ino();
    let count = sb.s_inodes_count.get();
    let legal = |i: u32| i >= first && i <= count;
    if head != 0 && !legal(head) {
        r.say(
            ProblemCode::PR_0_ORPHAN_ILLEGAL_HEAD_INODE,
            Subject::Inode(head),
            format!("Illegal orphaned inode {head} in superblock."),
        );
        return r;
    }
    let mut seen = HashSet::new();
    let mut used = crate::orphan_blocks::InUse::new(fs);
    let mut ino = head;
    while ino != 0 && seen.insert(ino) {
        let Some(inode) = read(fs, ino) else { break };
        let next = inode.dtime();
        if next != 0 && !legal(next) {
            r.say(
                ProblemCode::PR_0_ORPHAN_ILLEGAL_INODE,
                Subject::Inode(next),
                format!("Illegal inode {next} in orphaned inode list."),
            );
            break;
        }
        if !release_checked(fs, ino, &inode, &mut used, &mut r) {
            return r;
        }
        ino = next;
    }
    if sb.has_compat(Compat::ORPHAN_FILE) {
        orphan_file(fs, &mut seen, &mut used, &mut r);
        if present {
            r.fixes.push(Fix::ClearOrphanPresent);
        }
    }
    r
}

fn read(fs: &Filesystem, ino: u32) -> Option<Inode> {
    let rec = fs.inode_record(InodeNr(ino)).ok()?;
    Inode::parse(&rec).ok()
}

/// The inodes listed in the orphan file's blocks, each released once; the
/// blocks are then emptied. As e2fsck, a size that is not whole blocks, a
/// hole, a block without the magic or with a bad checksum ends the
/// recovery from the file there (pass 0 then finds the file's state).
fn orphan_file(
    fs: &Filesystem,
    seen: &mut HashSet<u32>,
    used: &mut crate::orphan_blocks::InUse<'_>,
    out: &mut Released,
) {
    let sb = fs.superblock();
    let inum = sb.s_orphan_file_inum.get();
    let (first, count) = (sb.first_ino(), sb.s_inodes_count.get());
    let Ok(info) = fs.inode(InodeNr(inum)) else {
        return;
    };
    let bs = fs.block_size() as usize;
    if info.inode.size() % bs as u64 != 0 {
        out.say(
            ProblemCode::PR_0_ORPHAN_FILE_WRONG_SIZE,
            Subject::Inode(inum),
            format!(
                "Orphan file (inode {inum}) size is not multiple of block size. Terminating \
                 orphan file recovery."
            ),
        );
        return;
    }
    let Ok(runs) = fs.runs(&info) else { return };
    let gen = info.inode.generation();
    let csum = sb.has_ro_compat(RoCompat::METADATA_CSUM);
    let mut buf = vec![0u8; bs];
    let mut next_lblk = 0u64;
    for r in &runs {
        if r.logical != next_lblk {
            out.say(
                ProblemCode::PR_0_ORPHAN_FILE_HOLE,
                Subject::InodeAt(inum, next_lblk),
                format!(
                    "Orphan file (inode {inum}) contains hole at block {next_lblk}. Terminating \
                     orphan file recovery."
                ),
            );
            return;
        }
        next_lblk = r.logical + r.len;
        for k in 0..r.len.min(1 << 16) {
            let b = r.physical + k;
            if bs < TAIL || fs.device().read_at(&mut buf, b * bs as u64).is_err() {
                continue;
            }
            let t = bs - TAIL;
            if u32::from_le_bytes([buf[t], buf[t + 1], buf[t + 2], buf[t + 3]])
                != ORPHAN_BLOCK_MAGIC
            {
                out.say(
                    ProblemCode::PR_0_ORPHAN_FILE_BAD_MAGIC,
                    Subject::InodeAt(inum, r.logical + k),
                    format!(
                        "Orphan file (inode {inum}) block {} contains wrong magic. Terminating \
                         orphan file recovery.",
                        r.logical + k
                    ),
                );
                return;
            }
            let sound = !csum
                || ext4r_format::orphan::OrphanBlock::parse(&buf).is_ok_and(|o| {
                    o.verify_checksum(sb.csum_seed(), InodeNr(inum), gen, ext4r_format::BlockNr(b))
                        .is_ok()
                });
            if !sound {
                out.say(
                    ProblemCode::PR_0_ORPHAN_FILE_BAD_CHECKSUM,
                    Subject::InodeAt(inum, r.logical + k),
                    format!(
                        "Orphan file (inode {inum}) block {} contains wrong checksum. \
                         Terminating orphan file recovery.",
                        r.logical + k
                    ),
                );
                return;
            }
            let mut any = false;
            for w in buf[..t].chunks(4) {
                let ino = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
                if ino == 0 {
                    continue;
                }
                any = true;
                if ino < first || ino > count || !seen.insert(ino) {
                    continue;
                }
                if let Some(inode) = read(fs, ino) {
                    if !release_checked(fs, ino, &inode, used, out) {
                        return;
                    }
                }
            }
            if any {
                out.fixes.push(Fix::OrphanBlockClear(b, inum, gen));
            }
        }
    }
}

/// Releases one orphan after a look at its blocks (see
/// [`crate::orphan_blocks`]); false when one of them stops the release:
/// the orphan stays as it is, and the filesystem is marked not clean so
/// that the full check follows, as e2fsck does.
fn release_checked(
    fs: &Filesystem,
    ino: u32,
    inode: &Inode,
    used: &mut crate::orphan_blocks::InUse<'_>,
    out: &mut Released,
) -> bool {
    let Some(stop) = crate::orphan_blocks::check(fs, ino, inode, used) else {
        let before = out.fixes.len();
        release(fs, ino, inode, out);
        for f in &out.fixes[before..] {
            if let Fix::FreeBlocks(runs) = f {
                used.free(runs);
            }
        }
        return true;
    };
    // e2fsck says it is releasing the inode before it meets the block.
    out.say(
        ProblemCode::PR_0_ORPHAN_CLEAR_INODE,
        Subject::Inode(ino),
        clear_message(ino, inode),
    );
    if let Some((code, message)) = stop {
        out.say(code, Subject::Inode(ino), message);
    }
    out.fixes
        .push(Fix::Superblock(crate::fix::super_edit::SuperEdit::NotValid));
    false
}

fn clear_message(ino: u32, inode: &Inode) -> String {
    format!(
        "{} orphaned inode {ino} (uid={}, gid={}, mode=0{:o}, size={})",
        if inode.links_count() != 0 {
            "Truncating"
        } else {
            "Clearing"
        },
        inode.uid(),
        inode.gid(),
        inode.mode(),
        inode.size()
    )
}

/// One orphan: deleted (blocks, xattr block reference and inode freed,
/// deletion time set) or still linked (taken off the list, truncated to
/// its size).
fn release(fs: &Filesystem, ino: u32, inode: &Inode, out: &mut Released) {
    out.inodes.push(ino);
    let linked = inode.links_count() != 0;
    out.say(
        ProblemCode::PR_0_ORPHAN_CLEAR_INODE,
        Subject::Inode(ino),
        clear_message(ino, inode),
    );
    let fixes = &mut out.fixes;
    if linked {
        fixes.push(Fix::InodeClearDtime(ino));
        fixes.push(Fix::TruncateOrphan(ino));
        return;
    }
    let mut runs: Vec<(u64, u64)> = crate::dup::pointers(fs, ino)
        .map(|(_, p)| p.into_iter().map(|(_, b, n, _)| (b, n)).collect())
        .unwrap_or_default();
    let wide = fs
        .superblock()
        .has_incompat(ext4r_format::features::Incompat::BIT64);
    let acl = inode.file_acl(wide).0;
    let g = fs.geometry();
    if acl >= g.first_data_block && acl < g.blocks_count {
        let mut hdr = vec![0u8; fs.block_size() as usize];
        if fs
            .device()
            .read_at(&mut hdr, acl * u64::from(fs.block_size()))
            .is_ok()
        {
            let refs = u32::from_le_bytes([hdr[4], hdr[5], hdr[6], hdr[7]]);
            if refs > 1 {
                fixes.push(Fix::XattrRefcount(acl, refs - 1));
            } else {
                runs.push((acl, 1));
            }
        }
    }
    fixes.push(Fix::FreeBlocks(runs));
    fixes.push(Fix::FreeInode(ino, inode.is_dir()));
    fixes.push(Fix::ClearInode(ino));
}
