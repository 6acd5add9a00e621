//! Workload (d): the write layer's own transactions, each one change that
//! keeps the filesystem consistent — a file created in /lost+found (an
//! inode and a run of blocks taken, data written, a directory entry
//! added), a file's contents replaced (a new run, the old one freed and
//! revoked), a file deleted (entry, inode and blocks given back) — with the
//! root directory's times rewritten in each. After a cut, whatever
//! recovered the image, the files in /lost+found must be exactly those of
//! some committed prefix of the transactions, at least every transaction
//! acknowledged before the cut.

use super::image::Rng;
use anyhow::{bail, Context, Result};
use ext4r::fs::{Filesystem, OpenOptions};
use ext4r_format::extent::{write_leaf, Extent};
use ext4r_format::inode::{Inode, InodeFlags};
use ext4r_format::{BlockNr, InodeNr};
use ext4r_txn::csum::BlockKind;
use ext4r_txn::device::BlockDevice;
use ext4r_txn::map::{self};
use ext4r_txn::txn::{Commit, Transaction};
use ext4r_txn::volume::{Checkpoint, Volume, VolumeOptions};
use std::collections::BTreeMap;
use std::io::Read;
use std::sync::Arc;

const LPF: u32 = 11;

/// The files of /lost+found after each transaction: name -> version.
pub type Model = Vec<BTreeMap<String, u32>>;

/// The contents of file `name` at `version`: its name, version and a
/// pattern, `blocks` blocks long.
fn contents(name: &str, version: u32, blocks: u64, bs: usize) -> Vec<u8> {
    let mut out = vec![0u8; blocks as usize * bs];
    let head = format!("{name}:{version}:{blocks};");
    out[..head.len()].copy_from_slice(head.as_bytes());
    let mut x = u64::from(version).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ name.len() as u64;
    for b in out[head.len()..].iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    out
}

fn parse_head(data: &[u8]) -> Option<(String, u32, u64)> {
    let end = data.iter().position(|&b| b == b';')?;
    let s = std::str::from_utf8(&data[..end]).ok()?;
    let mut it = s.split(':');
    let name = it.next()?.to_string();
    let v = it.next()?.parse().ok()?;
    let n = it.next()?.parse().ok()?;
    Some((name, v, n))
}

/// Runs `ops` transactions on `dev`; returns the model after each (index
/// 0: before any) and the writes made when each was acknowledged.
pub fn run(
    dev: Arc<dyn BlockDevice>,
    ops: usize,
    seed: u64,
    deferred: bool,
    writes: &dyn Fn() -> usize,
) -> Result<(Model, Vec<usize>)> {
    let mut o = VolumeOptions::default();
    o.checkpoint = if deferred {
        Checkpoint::Deferred
    } else {
        Checkpoint::EachCommit
    };
    o.now = Some(1_700_000_000);
    let mut vol = Volume::open(dev, o)?;
    let mut rng = Rng(seed | 1);
    let mut model: Model = vec![BTreeMap::new()];
    let mut acked = Vec::new();
    // name -> (inode, first block, blocks)
    let mut files: BTreeMap<String, (u32, u64, u64)> = BTreeMap::new();
    let mut next = 0u32;
    for k in 0..ops {
        let mut state = model.last().cloned().unwrap_or_default();
        let mut t = vol.begin();
        let choice = if files.is_empty() { 0 } else { rng.below(3) };
        match choice {
            0 if files.len() < 24 => {
                let name = format!("c{next}");
                next += 1;
                let blocks = 1 + rng.below(12);
                let (ino, start) = create(&mut t, &name, blocks)?;
                files.insert(name.clone(), (ino, start, blocks));
                state.insert(name, 0);
            }
            1 | 0 => {
                let i = rng.below(files.len() as u64) as usize;
                let name = files.keys().nth(i).cloned().unwrap_or_default();
                let (ino, old, old_n) = files[&name];
                let v = state.get(&name).copied().unwrap_or(0) + 1;
                let blocks = 1 + rng.below(12);
                let start = rewrite(&mut t, ino, &name, v, blocks, (old, old_n))?;
                files.insert(name.clone(), (ino, start, blocks));
                state.insert(name, v);
            }
            _ => {
                let i = rng.below(files.len() as u64) as usize;
                let name = files.keys().nth(i).cloned().unwrap_or_default();
                let (ino, start, n) = files[&name];
                delete(&mut t, &name, ino, (start, n))?;
                files.remove(&name);
                state.remove(&name);
            }
        }
        // A metadata rewrite in every transaction: the root's times.
        let root = t.inode_mut(2)?;
        root[8..12].copy_from_slice(&(1_000_000 + k as u32).to_le_bytes());
        t.commit(Commit::Auto)?;
        drop(t);
        acked.push(writes());
        model.push(state);
    }
    vol.close()?;
    Ok((model, acked))
}

fn inode_record(
    t: &Transaction<&mut Volume>,
    blocks: u64,
    start: u64,
    size: u64,
) -> Result<Vec<u8>> {
    let isz = t.geometry().inode_size as usize;
    let bs = t.geometry().block_size;
    let mut i = Inode::zeroed();
    i.i_mode.set(0o100644);
    i.i_links_count.set(1);
    i.set_size(size);
    i.set_flags(InodeFlags::EXTENTS);
    if isz > 128 {
        i.i_extra_isize.set(32);
    }
    let mut root = [0u8; 60];
    if blocks > 0 {
        let e = Extent::new(0, BlockNr(start), blocks as u16, false)?;
        write_leaf(&mut root, &[e])?;
    } else {
        write_leaf(&mut root, &[])?;
    }
    i.i_block = root;
    i.set_blocks_count(blocks * u64::from(bs / 512), true, bs)?;
    let mut rec = vec![0u8; isz];
    i.write(&mut rec)?;
    Ok(rec)
}

fn create(t: &mut Transaction<&mut Volume>, name: &str, blocks: u64) -> Result<(u32, u64)> {
    let bs = t.geometry().block_size as usize;
    let ino = t.alloc_inode(LPF, false)?;
    let goal = t
        .geometry()
        .group_first_block((ino - 1) / t.geometry().inodes_per_group);
    let (start, got) = t.alloc_run(goal, blocks)?.context("no space")?;
    if got != blocks {
        bail!("wanted {blocks} contiguous blocks, got {got}");
    }
    let data = contents(name, 0, blocks, bs);
    for k in 0..blocks {
        t.write_data(
            start + k,
            data[k as usize * bs..(k as usize + 1) * bs].to_vec(),
        )?;
    }
    let rec = inode_record(t, blocks, start, blocks * bs as u64)?;
    t.write_inode(ino, rec)?;
    add_entry(t, name, ino)?;
    Ok((ino, start))
}

fn rewrite(
    t: &mut Transaction<&mut Volume>,
    ino: u32,
    name: &str,
    version: u32,
    blocks: u64,
    old: (u64, u64),
) -> Result<u64> {
    let bs = t.geometry().block_size as usize;
    let (start, got) = t.alloc_run(old.0, blocks)?.context("no space")?;
    if got != blocks {
        bail!("wanted {blocks} contiguous blocks, got {got}");
    }
    let data = contents(name, version, blocks, bs);
    for k in 0..blocks {
        t.write_data(
            start + k,
            data[k as usize * bs..(k as usize + 1) * bs].to_vec(),
        )?;
    }
    t.free_blocks(old.0, old.1)?;
    let rec = inode_record(t, blocks, start, blocks * bs as u64)?;
    t.write_inode(ino, rec)?;
    Ok(start)
}

fn delete(t: &mut Transaction<&mut Volume>, name: &str, ino: u32, run: (u64, u64)) -> Result<()> {
    remove_entry(t, name)?;
    t.free_blocks(run.0, run.1)?;
    t.free_inode(ino, false)?;
    let rec = t.inode_mut(ino)?;
    // links 0, dtime set: a deleted inode as the kernel leaves it.
    rec[0x1A..0x1C].copy_from_slice(&0u16.to_le_bytes());
    rec[0x14..0x18].copy_from_slice(&1_700_000_000u32.to_le_bytes());
    Ok(())
}

/// The blocks of /lost+found and its generation.
fn lpf_blocks(t: &Transaction<&mut Volume>) -> Result<(Vec<u64>, u32)> {
    let rec = t.read_inode(LPF)?;
    let inode = Inode::parse(&rec)?;
    let runs = map::runs(t, LPF, &inode, false)?;
    let blocks = runs
        .iter()
        .flat_map(|r| r.physical..r.physical + r.len)
        .collect();
    Ok((blocks, inode.generation()))
}

fn le16(b: &[u8], at: usize) -> usize {
    usize::from(u16::from_le_bytes([b[at], b[at + 1]]))
}

/// Entries of a linear directory block as (offset, rec_len, inode,
/// name_len); the checksum tail is left out.
fn entries(b: &[u8]) -> Vec<(usize, usize, u32, usize)> {
    let mut out = Vec::new();
    let mut off = 0;
    while off + 8 <= b.len() {
        let rec = le16(b, off + 4);
        if rec < 8 || off + rec > b.len() {
            break;
        }
        let ino = u32::from_le_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]]);
        let is_tail = ino == 0 && rec == 12 && b[off + 7] == 0xDE && off + 12 == b.len();
        if !is_tail {
            out.push((off, rec, ino, usize::from(b[off + 6])));
        }
        off += rec;
    }
    out
}

fn add_entry(t: &mut Transaction<&mut Volume>, name: &str, ino: u32) -> Result<()> {
    let (blocks, generation) = lpf_blocks(t)?;
    let need = (8 + name.len() + 3) & !3;
    for b in blocks {
        let kind = BlockKind::Dir {
            ino: LPF,
            generation,
        };
        let buf = t.read_block(b)?;
        for (off, rec, eino, nlen) in entries(&buf) {
            let used = if eino == 0 { 0 } else { (8 + nlen + 3) & !3 };
            if rec - used < need {
                continue;
            }
            let blk = t.block_mut(b, kind)?;
            let at = if eino == 0 {
                off
            } else {
                blk[off + 4..off + 6].copy_from_slice(&(used as u16).to_le_bytes());
                off + used
            };
            let new_rec = if eino == 0 { rec } else { rec - used };
            blk[at..at + 4].copy_from_slice(&ino.to_le_bytes());
            blk[at + 4..at + 6].copy_from_slice(&(new_rec as u16).to_le_bytes());
            blk[at + 6] = name.len() as u8;
            blk[at + 7] = 1;
            blk[at + 8..at + 8 + name.len()].copy_from_slice(name.as_bytes());
            return Ok(());
        }
    }
    bail!("no room in /lost+found for {name}")
}

fn remove_entry(t: &mut Transaction<&mut Volume>, name: &str) -> Result<()> {
    let (blocks, generation) = lpf_blocks(t)?;
    for b in blocks {
        let buf = t.read_block(b)?;
        let es = entries(&buf);
        for (k, &(off, rec, eino, nlen)) in es.iter().enumerate() {
            if eino == 0 || &buf[off + 8..off + 8 + nlen] != name.as_bytes() {
                continue;
            }
            let kind = BlockKind::Dir {
                ino: LPF,
                generation,
            };
            let blk = t.block_mut(b, kind)?;
            if k == 0 {
                blk[off..off + 4].fill(0);
            } else {
                let (poff, prec, _, _) = es[k - 1];
                blk[poff + 4..poff + 6].copy_from_slice(&((prec + rec) as u16).to_le_bytes());
            }
            return Ok(());
        }
    }
    bail!("{name} is not in /lost+found")
}

/// The files of /lost+found of a recovered image: name -> version, each
/// file's contents checked whole.
pub fn observe(dev: impl ext4r::device::BlockDevice + 'static) -> Result<BTreeMap<String, u32>> {
    let fs = Filesystem::open_with(dev, OpenOptions::default())?;
    let bs = fs.block_size() as usize;
    let mut out = BTreeMap::new();
    for e in fs.read_dir_path("/lost+found")? {
        if e.is_dot() {
            continue;
        }
        let name = e.name_lossy();
        let info = fs.inode(InodeNr(e.ino.0))?;
        let mut data = Vec::new();
        fs.open_file(&info)?.read_to_end(&mut data)?;
        let (n, v, blocks) =
            parse_head(&data).with_context(|| format!("{name}: contents not ours"))?;
        if n != name || data != contents(&name, v, blocks, bs) {
            bail!("{name}: contents torn (version {v})");
        }
        out.insert(name, v);
    }
    Ok(out)
}
