//! Workload (e): the engine's write API (`ext4r::write`), each operation
//! committed as it returns (`sync_every_op`): directories made, files
//! created, written, overwritten in part, truncated, renamed and removed.
//! After a cut and a recovery the tree must be exactly the one after some
//! operation, at least the last one acknowledged before the cut — except
//! that the operation in flight may have overwritten a file's existing
//! blocks in part: those go to their place before the commit, as with
//! ext4's data=ordered (see [`torn_between`]).

use super::image::Rng;
use anyhow::{Context, Result};
use ext4r::fs::{FileKind, Filesystem, OpenOptions};
use ext4r::write::{NewNode, WriteFs, WriteOptions};
use ext4r_txn::device::BlockDevice;
use std::collections::BTreeMap;
use std::io::Read;
use std::sync::Arc;

/// Where the workload's files live.
const ROOT: &str = "/api";
const ROOT_INO: u32 = 2;

/// The tree under [`ROOT`]: path -> contents (`None` for a directory).
pub type Tree = BTreeMap<String, Option<Vec<u8>>>;

fn split(p: &str) -> (&str, &str) {
    let i = p.rfind('/').unwrap_or(0);
    (if i == 0 { "/" } else { &p[..i] }, &p[i + 1..])
}

/// Files of many runs the workload shortens and deletes: more runs than
/// one transaction frees, so their blocks go through the orphan list.
const FRAGMENTED: [&str; 2] = ["/frag-a", "/frag-b"];

/// Before the recording: the workload's directory (the image around it is
/// not modelled) and two fragmented files in it (one block written in
/// every other). Returns the tree.
pub fn prepare(dev: Arc<dyn BlockDevice>) -> Result<Tree> {
    let mut o = WriteOptions::default();
    o.now = Some((1_700_000_000, 0));
    let mut fs = WriteFs::open(dev, o)?;
    let root = fs.mkdir(
        ROOT_INO,
        ROOT.trim_start_matches('/').as_bytes(),
        &NewNode::dir(0o755),
    )?;
    let bs = 4096u64;
    let mut tree = Tree::new();
    for (k, path) in FRAGMENTED.iter().enumerate() {
        let f = fs.create(root, &path.as_bytes()[1..], &NewNode::file(0o644))?;
        let mut content = Vec::new();
        for piece in 0..150u64 {
            let at = piece * 2 * bs;
            let data = vec![(k as u8 + 1).wrapping_mul(piece as u8 | 1); 700];
            fs.write(f, at, &data)?;
            content.resize(at as usize, 0);
            content.extend_from_slice(&data);
        }
        tree.insert(path.to_string(), Some(content));
    }
    fs.close()?;
    Ok(tree)
}

/// Runs `ops` operations from the tree `start`; returns the tree after
/// each (index 0: before) and the writes made when each returned.
pub fn run(
    dev: Arc<dyn BlockDevice>,
    ops: usize,
    seed: u64,
    deferred: bool,
    writes: &dyn Fn() -> usize,
    start: Tree,
) -> Result<(Vec<Tree>, Vec<usize>)> {
    let mut o = WriteOptions::default();
    o.sync_every_op = true;
    o.defer_checkpoint = deferred;
    o.now = Some((1_700_000_000, 0));
    let mut fs = WriteFs::open(dev, o)?;
    let mut rng = Rng(seed | 1);
    let mut tree = start;
    let mut states = vec![tree.clone()];
    let mut acked = Vec::new();
    let mut next = 0;
    for _ in 0..ops {
        let dirs: Vec<String> = std::iter::once(String::new())
            .chain(
                tree.iter()
                    .filter(|(_, v)| v.is_none())
                    .map(|(k, _)| k.clone()),
            )
            .collect();
        let files: Vec<String> = tree
            .iter()
            .filter(|(_, v)| v.is_some())
            .map(|(k, _)| k.clone())
            .collect();
        let fresh = |rng: &mut Rng, next: &mut usize| {
            *next += 1;
            format!("{}/e{}", dirs[rng.below(dirs.len() as u64) as usize], next)
        };
        let ino = |fs: &WriteFs, p: &str| {
            let full = if p == "/" {
                ROOT.to_string()
            } else {
                format!("{ROOT}{p}")
            };
            fs.lookup_path(&full).context("lookup")
        };
        match rng.below(9) {
            7 | 8 => {
                // A fragmented file shortened, or deleted: several
                // transactions, the orphan list between them.
                let Some(p) = FRAGMENTED.iter().find(|p| tree.contains_key(**p)) else {
                    continue;
                };
                let (d, n) = split(p);
                let di = ino(&fs, d)?;
                let f = ino(&fs, p)?;
                let len = tree[*p].as_ref().map_or(0, Vec::len);
                if len > 100_000 {
                    let keep = rng.below(20_000) as usize;
                    fs.truncate(f, keep as u64)?;
                    if let Some(Some(v)) = tree.get_mut(*p) {
                        v.truncate(keep);
                    }
                } else {
                    fs.unlink(di, n.as_bytes())?;
                    tree.remove(*p);
                }
            }
            0 => {
                let p = fresh(&mut rng, &mut next);
                let (d, n) = split(&p);
                let di = ino(&fs, d)?;
                fs.mkdir(di, n.as_bytes(), &NewNode::dir(0o755))?;
                tree.insert(p, None);
            }
            1 | 2 => {
                let p = fresh(&mut rng, &mut next);
                let (d, n) = split(&p);
                let di = ino(&fs, d)?;
                let len = rng.below(40_000) as usize;
                let fill = rng.next() as u8;
                let data: Vec<u8> = (0..len).map(|k| fill.wrapping_add((k / 7) as u8)).collect();
                let f = fs.create(di, n.as_bytes(), &NewNode::file(0o644))?;
                // Two operations, each committed: the empty file is a state.
                tree.insert(p.clone(), Some(Vec::new()));
                states.push(tree.clone());
                acked.push(writes());
                fs.write(f, 0, &data)?;
                tree.insert(p, Some(data));
            }
            3 if !files.is_empty() => {
                let p = &files[rng.below(files.len() as u64) as usize];
                let f = ino(&fs, p)?;
                let cur = tree[p].clone().unwrap_or_default();
                let off = rng.below(cur.len() as u64 + 5000) as usize;
                let len = rng.below(20_000) as usize;
                let fill = rng.next() as u8;
                let data: Vec<u8> = (0..len).map(|k| fill ^ k as u8).collect();
                fs.write(f, off as u64, &data)?;
                let mut new = cur;
                if new.len() < off + len {
                    new.resize(off + len, 0);
                }
                new[off..off + len].copy_from_slice(&data);
                tree.insert(p.clone(), Some(new));
            }
            4 if !files.is_empty() => {
                let p = &files[rng.below(files.len() as u64) as usize];
                let f = ino(&fs, p)?;
                let n = rng.below(30_000) as usize;
                fs.truncate(f, n as u64)?;
                let mut new = tree[p].clone().unwrap_or_default();
                new.resize(n, 0);
                tree.insert(p.clone(), Some(new));
            }
            5 if !files.is_empty() => {
                let p = files[rng.below(files.len() as u64) as usize].clone();
                let q = fresh(&mut rng, &mut next);
                let ((pd, pn), (qd, qn)) = (split(&p), split(&q));
                let (pi, qi) = (ino(&fs, pd)?, ino(&fs, qd)?);
                fs.rename(pi, pn.as_bytes(), qi, qn.as_bytes())?;
                let v = tree.remove(&p).unwrap_or(None);
                tree.insert(q, v);
            }
            6 if files.len() > 2 => {
                let p = files[rng.below(files.len() as u64) as usize].clone();
                let (d, n) = split(&p);
                let di = ino(&fs, d)?;
                fs.unlink(di, n.as_bytes())?;
                tree.remove(&p);
            }
            _ => continue,
        }
        states.push(tree.clone());
        acked.push(writes());
    }
    fs.close()?;
    Ok((states, acked))
}

/// The tree under [`ROOT`] of a recovered image, read with our read path
/// (empty while the directory is not there).
pub fn observe(dev: impl BlockDevice + 'static) -> Result<Tree> {
    let fs = Filesystem::open_with(dev, OpenOptions::default())?;
    let mut out = Tree::new();
    if fs.resolve(ROOT).is_err() {
        return Ok(out);
    }
    let mut stack = vec![String::new()];
    while let Some(d) = stack.pop() {
        for e in fs.read_dir_path(&format!("{ROOT}{d}"))? {
            if e.is_dot() {
                continue;
            }
            let p = format!("{d}/{}", e.name_lossy());
            if e.kind == FileKind::Directory {
                out.insert(p.clone(), None);
                stack.push(p);
            } else {
                let info = fs.inode(e.ino)?;
                let mut data = Vec::new();
                fs.open_file(&info)?.read_to_end(&mut data)?;
                out.insert(p, Some(data));
            }
        }
    }
    Ok(out)
}

/// Whether `seen` is the state `old` with the operation leading to `new`
/// cut short while overwriting allocated blocks in place: the same paths
/// as one of the two, every path as in one of them, except files whose
/// every byte is the old one or the new one.
pub fn torn_between(old: &Tree, new: &Tree, seen: &Tree) -> bool {
    let same_keys = |t: &Tree| t.keys().eq(seen.keys());
    if !same_keys(old) && !same_keys(new) {
        return false;
    }
    seen.iter().all(|(p, v)| {
        let (o, n) = (old.get(p), new.get(p));
        if o == Some(v) || n == Some(v) {
            return true;
        }
        let (Some(Some(o)), Some(Some(n)), Some(v)) = (o, n, v) else {
            return false;
        };
        (v.len() == o.len() || v.len() == n.len())
            && v.iter().enumerate().all(|(i, b)| {
                o.get(i).copied().unwrap_or(0) == *b || n.get(i).copied().unwrap_or(0) == *b
            })
    })
}
