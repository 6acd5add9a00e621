//! Emitting a decided layout: final counts and checksums, then every block
//! that must hold something, in sorted merged runs. Groups whose bitmaps are
//! uninitialised and inode tables known to be zero are not written at all.

use super::groups;
use super::journal;
use super::layout::Layout;
use super::objects::{self, Entry, InodeBuf, EXTENTS_FL};
use super::params::Params;
use super::quota;
use crate::device::BlockDevice;
use crate::error::Result;
use ext4r_format::checksum::fs_csum_seed;
use ext4r_format::features::{Incompat, RoCompat};
use ext4r_format::{num, orphan};
use ext4r_txn::bulk::RunWriter;
use ext4r_txn::csum::{BlockKind, Checksums};

/// Finishes the superblock and descriptors, then writes everything.
/// Returns the bytes handed to the device.
pub(crate) fn write(
    dev: &dyn BlockDevice,
    l: &mut Layout,
    p: &Params,
    device_zeroed: bool,
) -> Result<u64> {
    finish_superblock(l, p);
    let bs = u64::from(l.geo.block_size);
    // Every checksum is stamped by the write layer's dispatcher, from the
    // finished superblock's features and seed.
    let cs = Checksums::new(&l.sb);
    let mut w = RunWriter::new(dev);

    // Old superblock and partition-table-neighbouring sectors 2..7 are
    // zeroed (mke2fs's zap_sector(2, 6)); block writes below may replace
    // parts of this.
    if bs == 1024 {
        w.write(2048, vec![0; 2048])?;
    } else if bs > 2048 {
        w.write(2048, vec![0; num::index(bs) - 2048])?;
    } else {
        w.write(2048, vec![0; 2048])?;
    }
    // Old RAID metadata at the end of the device (the last 64 KiB-aligned
    // stretch), as mke2fs wipes it.
    let blocks = l.geo.blocks_count;
    let rsv = (65536 / bs).max(1);
    let mut start = blocks & !(rsv - 1);
    if start > rsv {
        start -= rsv;
    }
    if start > 0 && !device_zeroed {
        w.zero(start * bs, (blocks - start) * bs)?;
    }
    if !device_zeroed {
        for (b, n) in l.itable_zero_ranges() {
            w.zero(b * bs, n * bs)?;
        }
    }

    // Bitmaps and descriptor tables; the superblocks need the free count.
    let free_clusters = groups::write_bitmaps_and_gdt(&mut w, l, &cs)?;
    l.sb.set_free_blocks_count(free_clusters << l.geo.cluster_bits);

    // Objects: inodes and their blocks.
    write_objects(&mut w, l, p, &cs)?;

    // Superblocks last: the objects fill in their journal and quota fields.
    groups::write_superblocks(&mut w, l)?;
    w.flush()?;
    dev.flush()?;
    Ok(w.written)
}

fn finish_superblock(l: &mut Layout, p: &Params) {
    let free_inodes = l.free_inodes();
    let sb = &mut l.sb;
    if sb.s_errors.get() == 0 {
        sb.s_errors.set(1);
    }
    sb.s_uuid = p.uuid;
    sb.set_hash_seed_bytes(&p.hash_seed);
    sb.s_def_hash_version = 1; // half_md4
    sb.s_volume_name = [0; 16];
    sb.s_volume_name[..p.label.len()].copy_from_slice(&p.label);
    sb.s_last_mounted = [0; 64];
    sb.s_last_mounted[..p.last_mounted.len()].copy_from_slice(&p.last_mounted);
    if sb.has_ro_compat(RoCompat::METADATA_CSUM) {
        sb.s_checksum_type = 1;
        if sb.has_incompat(Incompat::CSUM_SEED) {
            sb.s_checksum_seed.set(fs_csum_seed(&p.uuid));
        }
    }
    if sb.has_incompat(Incompat::ENCRYPT) {
        // mke2fs records the default policy: AES-256-XTS for contents,
        // AES-256-CTS for names.
        sb.s_encrypt_algos = [1, 4, 0, 0];
    }
    let f = sb.features();
    if f.incompat.contains(Incompat::FLEX_BG)
        || f.ro_compat.intersects(
            RoCompat::HUGE_FILE
                | RoCompat::GDT_CSUM
                | RoCompat::DIR_NLINK
                | RoCompat::METADATA_CSUM
                | RoCompat::EXTRA_ISIZE,
        )
    {
        sb.s_kbytes_written.set(1);
    }
    sb.set_wtime(p.now);
    sb.s_free_inodes_count.set(free_inodes);
    if l.journal.is_some() {
        sb.s_journal_inum.set(8);
    }
}

fn write_objects(w: &mut RunWriter<'_>, l: &mut Layout, p: &Params, cs: &Checksums) -> Result<()> {
    let metadata_csum = cs.metadata_csum();
    let bs = l.geo.block_size as usize;
    let isz = l.geo.inode_size as usize;
    let now = p.now;
    let filetype = l.sb.has_incompat(Incompat::FILETYPE);
    let extents = l.sb.has_incompat(Incompat::EXTENTS);
    // A directory block of `ino` (generation 0), stamped.
    let dir = |ino: u32, nr: u64, mut b: Vec<u8>| -> Result<Vec<u8>> {
        cs.stamp_block(BlockKind::Dir { ino, generation: 0 }, nr, &mut b)?;
        Ok(b)
    };
    let sectors = |blocks: u64| blocks * (bs as u64 / 512);
    // i_blocks counts whole clusters: libext2fs adds a cluster's worth per
    // allocation call, even where (the resize inode) that call took a
    // single block of an already used cluster.
    let ratio = l.geo.cluster_ratio();
    let cluster_sectors = |clusters: u64| sectors(clusters * ratio);
    let mut inodes: Vec<(u32, InodeBuf)> = Vec::new();

    // Reserved inodes: zero with checksums under metadata_csum; the bad
    // block inode carries times.
    let quota_inos: Vec<u32> = l.quota.iter().map(|q| q.ino).collect();
    if metadata_csum {
        for ino in 3..11 {
            if ino == 7 || ino == 8 || quota_inos.contains(&ino) {
                continue;
            }
            inodes.push((ino, InodeBuf::new(isz)));
        }
    }
    let mut bad = InodeBuf::new(isz);
    bad.set_times(now);
    inodes.push((1, bad));

    // Root.
    let root_blk = l.root.blocks[0];
    let mut root = InodeBuf::new_file(isz, 0o040755, 3, now);
    root.set_owner(p.root_owner.0, p.root_owner.1);
    root.set_size(bs as u64);
    root.set_sectors(cluster_sectors(1));
    set_data_map(&mut root, &[root_blk], extents)?;
    inodes.push((2, root));
    w.write(
        root_blk * bs as u64,
        dir(
            2,
            root_blk,
            objects::dir_block(
                bs,
                &[
                    Entry { ino: 2, name: b"." },
                    Entry {
                        ino: 2,
                        name: b"..",
                    },
                    Entry {
                        ino: 11,
                        name: b"lost+found",
                    },
                ],
                filetype,
                metadata_csum,
                false,
            )?,
        )?,
    )?;
    // lost+found.
    let lpf = l.lost_found.blocks.clone();
    let inline = l.sb.has_incompat(Incompat::INLINE_DATA);
    let mut li = InodeBuf::new_file(isz, 0o040700, 2, now);
    if inline && isz >= 164 {
        // The emptied in-inode xattr area left by moving inline entries out.
        ext4r_format::xattr::empty_xattr_ibody_with_magic(&mut li.bytes)
            .map_err(|e| crate::error::Error::corrupt("lost+found", e))?;
    }
    li.set_size(lpf.len() as u64 * bs as u64);
    li.set_sectors(cluster_sectors(l.lost_found_clusters));
    set_data_map(&mut li, &lpf, extents)?;
    inodes.push((11, li));
    for (i, b) in lpf.iter().enumerate() {
        let dots = [
            Entry {
                ino: 11,
                name: b".",
            },
            Entry {
                ino: 2,
                name: b"..",
            },
        ];
        let entries: &[Entry<'_>] = if i == 0 { &dots } else { &[] };
        // Moving inline entries out of the inode leaves ".." at its
        // minimal length and an unused entry over the rest.
        let unused_rest = i == 0 && inline;
        w.write(
            b * bs as u64,
            dir(
                11,
                *b,
                objects::dir_block(bs, entries, filetype, metadata_csum, unused_rest)?,
            )?,
        )?;
    }

    // Resize inode: the double-indirect block points at the primary
    // reserved GDT blocks, each of which lists its copies in the backup
    // groups.
    if let Some(dind) = l.resize_dind {
        use super::resize_inode::{emit_blocks, inode_record};
        let total = emit_blocks(&l.geo, dind, |b, data| w.write(b * bs as u64, data))?;
        let bytes = inode_record(&l.geo, isz, dind, now, total);
        inodes.push((7, InodeBuf { bytes }));
    } else if metadata_csum {
        inodes.push((7, InodeBuf::new(isz)));
    }

    // Journal.
    if let Some(j) = l.journal.clone() {
        let img = journal::encode(
            &j,
            &journal::JournalSpec {
                block_size: bs,
                inode_size: isz,
                cluster_ratio: ratio,
                now,
                uuid: &p.uuid,
                fc_blocks: p.journal_fc_blocks,
                v1: false,
            },
        )?;
        // The journal is zeroed first; its mapping blocks and superblock
        // are written over that.
        if !p.lazy_journal_init {
            for &(s, n) in &img.data {
                w.zero(s * bs as u64, n * bs as u64)?;
            }
        }
        for (b, kind, mut buf) in img.blocks {
            cs.stamp_block(kind, b, &mut buf)?;
            w.write(b * bs as u64, buf)?;
        }
        // Backup of the journal inode's block map in the superblock.
        for (i, v) in img.jnl_blocks.iter().enumerate() {
            l.sb.s_jnl_blocks[i].set(*v);
        }
        l.sb.s_jnl_backup_type = 1;
        inodes.push((8, img.inode));
    } else if metadata_csum {
        inodes.push((8, InodeBuf::new(isz)));
    }

    if let Some((ino, runs)) = l.orphan_file.clone() {
        // Each block: zeroed inode slots, then the tail (magic, checksum
        // over the slots seeded with inode, generation and block number).
        let mut count = 0u64;
        let mut clusters = 0u64;
        let mut prev: Option<u64> = None;
        for &(_, start, n) in &runs {
            for b in start..start + n {
                if prev.is_none_or(|p| !l.same_cluster(p, b)) {
                    clusters += 1;
                }
                prev = Some(b);
                let mut buf = vec![0u8; bs];
                orphan::init_orphan_block(&mut buf)
                    .map_err(|e| crate::error::Error::corrupt("new orphan file block", e))?;
                cs.stamp_block(BlockKind::Orphan { ino, generation: 0 }, b, &mut buf)?;
                w.write(b * bs as u64, buf)?;
                count += 1;
            }
        }
        let mut oi = InodeBuf::new_file(isz, 0o100600, 1, now);
        oi.set_size(count * bs as u64);
        oi.set_sectors(cluster_sectors(clusters));
        if extents {
            oi.set_flags(EXTENTS_FL);
            oi.set_i_block(&objects::extent_root(&runs, None)?);
        }
        inodes.push((ino, oi));
        l.sb.s_orphan_file_inum.set(ino);
    }

    // Quota files: immutable regular files, their blocks written whole.
    for q in l.quota.clone() {
        for &(lblk, pblk) in &q.blocks.map {
            w.write(pblk * bs as u64, q.file.fs_block(lblk, bs))?;
        }
        let qi = quota::encode_inode(&q.file, &q.blocks, isz, bs as u64, ratio, extents, now)?;
        inodes.push((q.ino, qi));
        let field = match q.qtype {
            0 => &mut l.sb.s_usr_quota_inum,
            1 => &mut l.sb.s_grp_quota_inum,
            _ => &mut l.sb.s_prj_quota_inum,
        };
        field.set(q.ino);
    }

    for (ino, i) in inodes.iter_mut() {
        cs.stamp_inode(*ino, &mut i.bytes)?;
    }
    // The inode-table blocks holding these inodes: group 0's, unless a
    // tiny inode count per group (-N, -i) puts some in later groups.
    let ipg = l.geo.inodes_per_group as usize;
    let per_block = bs / isz;
    let place = |ino: u32| {
        let idx = (ino - 1) as usize;
        let table = l.tables[idx / ipg].inode_table;
        let within = idx % ipg;
        (
            table + (within / per_block) as u64,
            (within % per_block) * isz,
        )
    };
    inodes.sort_by_key(|(ino, _)| place(*ino));
    let mut cur: Option<(u64, Vec<u8>)> = None;
    for (ino, i) in inodes {
        let (blk, off) = place(ino);
        if cur.as_ref().is_some_and(|(b, _)| *b != blk) {
            if let Some((b, buf)) = cur.take() {
                w.write(b * bs as u64, buf)?;
            }
        }
        let (_, buf) = cur.get_or_insert_with(|| (blk, vec![0u8; bs]));
        buf[off..off + isz].copy_from_slice(&i.bytes);
    }
    if let Some((b, buf)) = cur {
        w.write(b * bs as u64, buf)?;
    }
    Ok(())
}

/// Points an inode at its data blocks: extents over the runs of
/// consecutive blocks (the layout keeps them within the inode's four), or
/// direct block pointers (at most twelve blocks).
fn set_data_map(i: &mut InodeBuf, blocks: &[u64], extents: bool) -> Result<()> {
    if extents {
        i.set_flags(EXTENTS_FL);
        i.set_i_block(&objects::extent_root(&block_runs(blocks), None)?);
    } else {
        let mut words = [0u32; 15];
        for (w, b) in words.iter_mut().zip(blocks.iter().take(12)) {
            *w = super::blockmap::ptr(*b);
        }
        i.set_block_words(&words);
    }
    Ok(())
}

/// `(logical, physical, length)` runs of consecutive blocks, mapped from
/// logical block 0.
pub(crate) fn block_runs(blocks: &[u64]) -> Vec<(u64, u64, u64)> {
    let mut runs: Vec<(u64, u64, u64)> = Vec::new();
    for (lblk, &b) in blocks.iter().enumerate() {
        match runs.last_mut() {
            Some((_, s, n)) if *s + *n == b => *n += 1,
            _ => runs.push((lblk as u64, b, 1)),
        }
    }
    runs
}
