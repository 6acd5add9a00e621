//! New numbers for the inodes past the new inode count. Each moves with
//! every reference to it in the same transaction: its record (the old
//! one cleared), every directory entry naming it (`..` of its
//! subdirectories and its own `.` among them; inline directories keep
//! their parent in `i_block` and entries in `system.data`), extended
//! attributes naming it as their EA inode, the superblock's fields; and
//! with metadata_csum the checksums its number seeds (its extent tree, its
//! directory blocks, the orphan file's blocks).

use super::scan::{each_inode, fast_symlink, maps_blocks};
use super::{Mover, Short};
use crate::error::Error;
use crate::resize::error::Result;
use crate::resize::geometry::Shape;
use ext4r_format::dir::{inline_dir_parent, leaf, set_inline_dir_parent, DirBlockIter};
use ext4r_format::features::{Incompat, RoCompat};
use ext4r_format::inode::{Inode, InodeFlags};
use ext4r_format::xattr::{
    ibody_entries_at, index, parse_xattr_block, parse_xattr_ibody, set_value_inum, XattrEntry,
    XattrValue,
};
use ext4r_format::InodeNr;
use ext4r_txn::csum::BlockKind;
use ext4r_txn::map;
use std::collections::{BTreeMap, HashMap};
use zerocopy::FromBytes;

/// Where `i_block` starts in an inode record.
const I_BLOCK: usize = core::mem::offset_of!(Inode, i_block);

/// A reference to an inode that is renumbered.
#[derive(Debug, Clone, Copy)]
enum Ref {
    /// A directory entry's inode field in block `block` of directory
    /// `dir` (generation `gen`), at byte `off`.
    Entry {
        dir: u32,
        gen: u32,
        block: u64,
        off: usize,
    },
    /// A 4-byte inode number inside directory `dir`'s own record at
    /// `off` (an inline directory's parent or entry); `entry`: the
    /// `system.data` entry whose hash covers it, when it lies there.
    InRecord {
        dir: u32,
        off: usize,
        entry: Option<usize>,
    },
    /// An EA inode reference in inode `owner`'s record, entry at `entry`.
    IbodyEa { owner: u32, entry: usize },
    /// An EA inode reference in xattr block `block`, entry at `entry`.
    BlockEa { block: u64, entry: usize },
}

/// What the references scan keeps of each inode to renumber.
struct Target {
    dir: bool,
    gen: u32,
    refs: Vec<Ref>,
}

/// Gives every inode past the new inode count a free number below it.
pub(crate) fn renumber(m: &mut Mover<'_>, shape: &Shape) -> Result<std::result::Result<(), Short>> {
    let limit = u64::from(shape.geo.group_count) * u64::from(shape.geo.inodes_per_group);
    let sb = m.t.superblock().clone();
    let huge = sb.has_ro_compat(RoCompat::HUGE_FILE);
    let wide = sb.has_incompat(Incompat::BIT64);
    let ea_inode = sb.has_incompat(Incompat::EA_INODE);
    let geo = m.t.geometry().clone();
    let bs = geo.block_size;
    let cluster = u64::from(bs) << geo.cluster_bits;
    // Which inodes.
    let mut targets: BTreeMap<u32, Target> = BTreeMap::new();
    each_inode(m, |n, rec| {
        if u64::from(n) > limit {
            let inode = Inode::parse(rec).map_err(|e| Error::corrupt(format!("inode {n}"), e))?;
            targets.insert(
                n,
                Target {
                    dir: inode.is_dir(),
                    gen: inode.generation(),
                    refs: Vec::new(),
                },
            );
        }
        Ok(())
    })?;
    if targets.is_empty() {
        return Ok(Ok(()));
    }
    // Every reference to them: directory entries, EA inode references.
    let mut dirs: Vec<(u32, Inode)> = Vec::new();
    let mut xattr_blocks: BTreeMap<u64, ()> = BTreeMap::new();
    each_inode(m, |n, rec| {
        let inode = Inode::parse(rec).map_err(|e| Error::corrupt(format!("inode {n}"), e))?;
        if inode.links_count() == 0 && n >= sb.first_ino() {
            return Ok(());
        }
        if inode.is_dir() {
            if inode.flags().contains(InodeFlags::INLINE_DATA) {
                inline_refs(n, rec, bs, &mut targets);
            } else {
                dirs.push((n, inode));
            }
        }
        if ea_inode {
            if let Ok(Some(entries)) = parse_xattr_ibody(rec) {
                for e in entries.iter().flatten() {
                    if let XattrValue::EaInode { inode: v, .. } = e.value {
                        if let Some(t) = targets.get_mut(&v.0) {
                            t.refs.push(Ref::IbodyEa {
                                owner: n,
                                entry: e.offset,
                            });
                        }
                    }
                }
            }
            let acl = inode.file_acl(wide).0;
            if acl != 0 {
                xattr_blocks.insert(acl, ());
            }
        }
        Ok(())
    })?;
    for (n, inode) in &dirs {
        let (runs, _) = map::runs_and_nodes(&m.t, *n, inode, false)?;
        for r in runs.iter().filter(|r| !r.unwritten) {
            for b in r.physical..r.physical + r.len {
                let block = m.t.read_block(b)?;
                for e in DirBlockIter::new(&block).flatten() {
                    if let Some(t) = targets.get_mut(&e.inode.0) {
                        t.refs.push(Ref::Entry {
                            dir: *n,
                            gen: inode.generation(),
                            block: b,
                            off: e.offset,
                        });
                    }
                }
            }
        }
    }
    for &b in xattr_blocks.keys() {
        let block = m.t.read_block(b)?;
        if let Ok((_, entries)) = parse_xattr_block(&block) {
            for e in entries.iter().flatten() {
                if let XattrValue::EaInode { inode: v, .. } = e.value {
                    if let Some(t) = targets.get_mut(&v.0) {
                        t.refs.push(Ref::BlockEa {
                            block: b,
                            entry: e.offset,
                        });
                    }
                }
            }
        }
    }
    drop(dirs);
    // Renumber, each with its references, the transactions committed as
    // the journal's share fills.
    let csum = sb.has_ro_compat(RoCompat::METADATA_CSUM);
    let orphan_file = sb.s_orphan_file_inum.get();
    let mut cur: HashMap<u32, u32> = HashMap::new();
    let now = |cur: &HashMap<u32, u32>, n: u32| cur.get(&n).copied().unwrap_or(n);
    for (&x, t) in &targets {
        let y = match m.t.alloc_inode(x, t.dir) {
            Ok(y) => y,
            Err(ext4r_txn::Error::NoFreeInodes) => {
                let left = targets.range(x..).count() as u64;
                return Ok(Err(Short {
                    blocks: left.div_ceil(u64::from(geo.inodes_per_group)) * geo.blocks_per_group,
                }));
            }
            Err(e) => return Err(e.into()),
        };
        let rec = m.t.read_inode(x)?;
        let inode = Inode::parse(&rec).map_err(|e| Error::corrupt(format!("inode {x}"), e))?;
        m.t.write_inode(y, rec.clone())?;
        m.t.write_inode(x, vec![0u8; rec.len()])?;
        m.t.free_inode(x, t.dir)?;
        cur.insert(x, y);
        if csum && maps_blocks(&inode, huge, bs, cluster) {
            let fast = fast_symlink(&inode, huge, bs, cluster);
            let (runs, nodes) = map::runs_and_nodes(&m.t, x, &inode, fast)?;
            if inode.flags().contains(InodeFlags::EXTENTS) {
                for b in nodes {
                    let was = BlockKind::Extent {
                        ino: x,
                        generation: t.gen,
                    };
                    let block = m.t.read_block_checked(b, was)?;
                    let kind = BlockKind::Extent {
                        ino: y,
                        generation: t.gen,
                    };
                    m.t.write_block(b, kind, block)?;
                }
            }
            // (old kind, new kind): the checksum is verified with the old
            // number's seed and stamped at commit with the new one's.
            let kinds = if inode.is_dir() {
                Some((
                    BlockKind::Dir {
                        ino: x,
                        generation: t.gen,
                    },
                    BlockKind::Dir {
                        ino: y,
                        generation: t.gen,
                    },
                ))
            } else if x == orphan_file {
                Some((
                    BlockKind::Orphan {
                        ino: x,
                        generation: t.gen,
                    },
                    BlockKind::Orphan {
                        ino: y,
                        generation: t.gen,
                    },
                ))
            } else {
                None
            };
            if let Some((was, kind)) = kinds {
                for r in runs.iter().filter(|r| !r.unwritten) {
                    for b in r.physical..r.physical + r.len {
                        let block = m.t.read_block_checked(b, was)?;
                        m.t.write_block(b, kind, block)?;
                    }
                }
            }
        }
        // Every place below is one the scan found a reference at, so none
        // of the setters can miss.
        for r in &t.refs {
            match *r {
                Ref::Entry {
                    dir,
                    gen,
                    block,
                    off,
                } => {
                    let kind = BlockKind::Dir {
                        ino: now(&cur, dir),
                        generation: gen,
                    };
                    leaf::set_inode_at(m.t.block_mut(block, kind)?, off, y);
                }
                Ref::InRecord { dir, off, entry } => {
                    let rec = m.t.inode_mut(now(&cur, dir))?;
                    if off == I_BLOCK {
                        set_inline_dir_parent(&mut rec[I_BLOCK..], InodeNr(y));
                    } else {
                        leaf::set_inode_at(rec, off, y);
                    }
                    if let Some(at) = entry {
                        rehash_ibody_entry(rec, at);
                    }
                }
                Ref::IbodyEa { owner, entry } => {
                    let rec = m.t.inode_mut(now(&cur, owner))?;
                    set_value_inum(rec, entry, y);
                }
                Ref::BlockEa { block, entry } => {
                    set_value_inum(m.t.block_mut(block, BlockKind::Xattr)?, entry, y);
                }
            }
        }
        {
            let s = m.t.superblock().clone();
            let fields = [
                s.s_usr_quota_inum.get(),
                s.s_grp_quota_inum.get(),
                s.s_prj_quota_inum.get(),
                s.s_orphan_file_inum.get(),
                s.s_lpf_ino.get(),
            ];
            if fields.contains(&x) {
                let sm = m.t.superblock_mut();
                for f in [
                    &mut sm.s_usr_quota_inum,
                    &mut sm.s_grp_quota_inum,
                    &mut sm.s_prj_quota_inum,
                    &mut sm.s_orphan_file_inum,
                    &mut sm.s_lpf_ino,
                ] {
                    if f.get() == x {
                        f.set(y);
                    }
                }
            }
        }
        m.moved.inodes += 1;
        m.maybe_commit()?;
    }
    Ok(Ok(()))
}

/// The references inside inline directory `n`'s record `rec`: its parent
/// (the first word of `i_block`), its entries there and in `system.data`.
fn inline_refs(n: u32, rec: &[u8], bs: u32, targets: &mut BTreeMap<u32, Target>) {
    let mut push = |ino: u32, off: usize, entry: Option<usize>| {
        if let Some(t) = targets.get_mut(&ino) {
            t.refs.push(Ref::InRecord { dir: n, off, entry });
        }
    };
    let Some(parent) = rec.get(I_BLOCK..).and_then(inline_dir_parent) else {
        return;
    };
    push(parent.0, I_BLOCK, None);
    let area = &rec[I_BLOCK + 4..I_BLOCK + 60];
    for e in DirBlockIter::with_block_size(area, bs).flatten() {
        push(e.inode.0, I_BLOCK + 4 + e.offset, None);
    }
    let Some(first) = ibody_entries_at(rec) else {
        return;
    };
    let Ok(Some(entries)) = parse_xattr_ibody(rec) else {
        return;
    };
    for e in entries.iter().flatten() {
        if e.entry.e_name_index != index::SYSTEM || e.name != b"data" {
            continue;
        }
        if let XattrValue::Inline(v) = e.value {
            let start = first + usize::from(e.entry.e_value_offs.get());
            if start + v.len() > rec.len() {
                continue;
            }
            for d in DirBlockIter::with_block_size(v, bs).flatten() {
                push(d.inode.0, start + d.offset, Some(e.offset));
            }
        }
    }
}

/// Recomputes the hash of the in-inode xattr entry at `at` in `rec`
/// after its value changed, when it carries one (e2fsck checks a non-zero
/// in-inode hash).
fn rehash_ibody_entry(rec: &mut [u8], at: usize) {
    let stored = rec
        .get(at..)
        .and_then(|r| XattrEntry::ref_from_prefix(r).ok())
        .map_or(0, |(e, _)| e.e_hash.get());
    if stored == 0 {
        return;
    }
    let hash = match parse_xattr_ibody(rec) {
        Ok(Some(entries)) => entries
            .iter()
            .flatten()
            .find(|e| e.offset == at)
            .and_then(|e| e.compute_hash(false)),
        _ => None,
    };
    if let Some(h) = hash {
        if let Some(Ok((e, _))) = rec.get_mut(at..).map(XattrEntry::mut_from_prefix) {
            e.e_hash.set(h);
        }
    }
}
