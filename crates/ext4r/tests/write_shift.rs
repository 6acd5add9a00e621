//! The write API's range shifts (fallocate's `COLLAPSE_RANGE` and
//! `INSERT_RANGE`: [`WriteFs::collapse_range`], [`WriteFs::insert_range`])
//! and whiteout renames ([`WriteFs::rename_whiteout`]):
//!
//! - seeded collapses and inserts on files with holes, unwritten extents
//!   past the size and an extent tree with an index (1 KiB and 4 KiB
//!   blocks, bigalloc): the contents always equal a model's, and e2fsck
//!   finds every image clean;
//! - the kernel's refusals (EINVAL, EOPNOTSUPP, EFBIG as the library's
//!   errors), each changing nothing;
//! - an extent leaf failing its checksum under the range: refused as
//!   corruption, the block never restamped, the damage still e2fsck's;
//! - whiteouts: a character device 0:0 of mode 0 at the old name, owned
//!   as asked, directories moved with their link counts, a target
//!   replaced, no whiteout when both names are one inode, nothing changed
//!   when no inode is left for it.
//!
//! The kernel's side of both is in the mount's tests
//! (`tests/mount_options.rs`), on twin images.
#![allow(clippy::unwrap_used)]

mod common;

use common::{missing_tools, run_status, TempDir};
use ext4r::device::{BlockDevice, MemDevice};
use ext4r::mkfs::{format, MkfsOptions};
use ext4r::write::{NewNode, WriteFs, WriteOptions, ROOT_INO};
use ext4r::Error;
use ext4r_format::inode::mode;
use std::sync::Arc;

const NOW: i64 = 1_700_000_000;

fn opts() -> WriteOptions {
    let mut o = WriteOptions::default();
    o.now = Some((NOW + 100, 0));
    o
}

/// A fresh 32 MiB filesystem of `block` byte blocks, clusters of
/// `cluster` bytes (bigalloc when larger), and `features` more.
fn fresh(block: u32, cluster: Option<u32>, features: &[&str]) -> Arc<MemDevice> {
    let dev = Arc::new(MemDevice::new(32 << 20));
    let mut m = MkfsOptions {
        size_bytes: 32 << 20,
        block_size: Some(block),
        cluster_size: cluster,
        ..MkfsOptions::reproducible(NOW)
    };
    m.features = features.iter().map(|f| f.to_string()).collect();
    if cluster.is_some() {
        m.features.push("bigalloc".into());
    }
    format(&*dev, &m, true).unwrap();
    dev
}

/// `e2fsck -fn` of the device's bytes: `Some(clean)`, `None` without it.
fn e2fsck_clean(dev: &MemDevice, dir: &TempDir, what: &str) -> Option<(bool, String)> {
    if missing_tools(&["e2fsck"]).is_some() {
        return None;
    }
    let img = dir.join(&format!("{what}.img"));
    dev.save(&img).unwrap();
    let (rc, out, err) = run_status("e2fsck", &["-fn", &img.display().to_string()], &[]).unwrap();
    Some((rc == 0, format!("{out}{err}")))
}

fn contents(w: &WriteFs, ino: u32) -> Vec<u8> {
    let size = w.stat(ino).unwrap().size();
    let mut buf = vec![0u8; size as usize];
    assert_eq!(w.read(ino, 0, &mut buf).unwrap(), buf.len());
    buf
}

/// A small deterministic generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

#[test]
fn collapses_and_inserts_follow_a_model() {
    let dir = TempDir::new("shift-model");
    for (block, cluster) in [(1024u32, None), (4096, None), (1024, Some(4096u32))] {
        let unit = u64::from(cluster.unwrap_or(block));
        let bs = u64::from(block);
        let dev = fresh(block, cluster, &[]);
        let mut w = WriteFs::open(dev.clone(), opts()).unwrap();
        let f = w.create(ROOT_INO, b"f", &NewNode::file(0o644)).unwrap();
        let mut model: Vec<u8> = Vec::new();
        // Every other unit written (an extent each: past what the inode
        // holds, so the tree has an index), with holes between.
        for k in 0..60u64 {
            let at = k * 2 * unit + (k % 3) * 7;
            let data: Vec<u8> = (0..unit - 20)
                .map(|b| (k * 31 + b % 251) as u8 | 1)
                .collect();
            w.write(f, at, &data).unwrap();
            let end = (at + data.len() as u64) as usize;
            if model.len() < end {
                model.resize(end, 0);
            }
            model[at as usize..end].copy_from_slice(&data);
        }
        // Unwritten blocks inside and past the size.
        w.fallocate(f, 3 * unit, 2 * unit, true).unwrap();
        let size = model.len() as u64;
        w.fallocate(f, size, 8 * unit, true).unwrap();
        assert_eq!(contents(&w, f), model, "{block}/{cluster:?}: before");
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ u64::from(block));
        let (mut collapses, mut inserts) = (0, 0);
        for step in 0..40 {
            let units = (model.len() as u64).div_ceil(unit);
            let off = rng.below(units) * unit;
            let len = (1 + rng.below(4)) * unit;
            if rng.below(2) == 0 {
                let r = w.collapse_range(f, off, len);
                if off + len >= model.len() as u64 {
                    assert!(
                        matches!(r, Err(Error::InvalidArgument(_))),
                        "collapse to the end: {r:?}"
                    );
                    continue;
                }
                r.unwrap();
                model.drain(off as usize..(off + len) as usize);
                collapses += 1;
            } else {
                w.insert_range(f, off, len).unwrap();
                let at = off as usize;
                model.splice(at..at, std::iter::repeat_n(0u8, len as usize));
                inserts += 1;
            }
            assert_eq!(
                w.stat(f).unwrap().size(),
                model.len() as u64,
                "{block}/{cluster:?} step {step}: size"
            );
            assert!(
                contents(&w, f) == model,
                "{block}/{cluster:?} step {step}: contents differ from the model"
            );
        }
        assert!(collapses > 5 && inserts > 5, "{collapses} {inserts}");
        // A unit's worth of blocks is a block count the file shows.
        assert_eq!(unit % bs, 0);
        w.close().unwrap();
        let w = WriteFs::open(dev.clone(), opts()).unwrap();
        assert!(
            contents(&w, f) == model,
            "{block}/{cluster:?}: after reopening"
        );
        drop(w);
        if let Some((clean, out)) = e2fsck_clean(&dev, &dir, &format!("m{block}")) {
            assert!(clean, "{block}/{cluster:?}: e2fsck: {out}");
        }
    }
}

#[test]
fn refusals_are_the_kernels_and_change_nothing() {
    let dev = fresh(4096, None, &[]);
    let mut w = WriteFs::open(dev.clone(), opts()).unwrap();
    let f = w.create(ROOT_INO, b"f", &NewNode::file(0o644)).unwrap();
    w.write(f, 0, &[7u8; 40960]).unwrap();
    let d = w.mkdir(ROOT_INO, b"d", &NewNode::dir(0o755)).unwrap();
    let inval = |r: ext4r::Result<()>, what: &str| {
        assert!(matches!(r, Err(Error::InvalidArgument(_))), "{what}: {r:?}");
    };
    inval(w.collapse_range(f, 100, 4096), "unaligned offset");
    inval(w.collapse_range(f, 4096, 100), "unaligned length");
    inval(w.collapse_range(f, 4096, 0), "nothing");
    inval(
        w.collapse_range(f, 4096, 36864),
        "a collapse reaching the end",
    );
    inval(w.collapse_range(f, 36864, 8192), "a collapse past the end");
    inval(w.insert_range(f, 40960, 4096), "an insert at the end");
    inval(w.insert_range(f, 4096, 1000), "an unaligned insert");
    let r = w.insert_range(f, 0, 1 << 44);
    assert!(matches!(r, Err(Error::FileTooLarge(_))), "EFBIG: {r:?}");
    let r = w.collapse_range(d, 0, 4096);
    assert!(r.is_err(), "a directory: {r:?}");
    assert_eq!(w.stat(f).unwrap().size(), 40960);
    assert!(contents(&w, f).iter().all(|&b| b == 7));
    drop(w);
    // A file mapped by blocks, not extents: EOPNOTSUPP, as the kernel.
    let dev = fresh(4096, None, &["^extent", "^flex_bg", "^64bit"]);
    let mut w = WriteFs::open(dev, opts()).unwrap();
    let f = w.create(ROOT_INO, b"f", &NewNode::file(0o644)).unwrap();
    w.write(f, 0, &[7u8; 40960]).unwrap();
    for r in [w.collapse_range(f, 0, 4096), w.insert_range(f, 0, 4096)] {
        assert!(matches!(r, Err(Error::Unsupported(_))), "{r:?}");
    }
}

/// The extent tree blocks (not data) of `ino` on `dev`.
fn tree_blocks(dev: &MemDevice, path: &str) -> Vec<u64> {
    let mut o = ext4r::fs::OpenOptions::default();
    o.verify_checksums = false;
    let fs = ext4r::fs::Filesystem::open_with(dev.snapshot(), o).unwrap();
    let info = fs.resolve(path).unwrap();
    let data: std::collections::BTreeSet<u64> = fs
        .runs(&info)
        .unwrap()
        .iter()
        .flat_map(|r| r.physical..r.physical + r.len)
        .collect();
    ext4r_txn::map::all_blocks(&fs, info.ino.0, &info.inode)
        .unwrap()
        .into_iter()
        .filter(|b| !data.contains(b))
        .collect()
}

#[test]
fn a_leaf_failing_its_checksum_is_refused_never_restamped() {
    let dir = TempDir::new("shift-damage");
    let dev = fresh(1024, None, &[]);
    let mut w = WriteFs::open(dev.clone(), opts()).unwrap();
    let big = w.create(ROOT_INO, b"big", &NewNode::file(0o644)).unwrap();
    for k in 0..40u64 {
        w.write(big, k * 2048, &[k as u8 | 1; 1024]).unwrap();
    }
    w.close().unwrap();
    let leaves = tree_blocks(&dev, "/big");
    assert!(!leaves.is_empty(), "no extent leaf below the inode");
    let leaf = leaves[0];
    // A byte of the first extent's logical start: the leaf's checksum
    // no longer matches.
    let mut b = vec![0u8; 1024];
    dev.read_at(&mut b, leaf * 1024).unwrap();
    b[13] ^= 0x01;
    dev.write_at(&b, leaf * 1024).unwrap();
    if let Some((clean, _)) = e2fsck_clean(&dev, &dir, "damaged") {
        assert!(!clean, "e2fsck must see the damage");
    }
    let before = dev.to_vec().unwrap();
    let mut w = WriteFs::open(dev.clone(), opts()).unwrap();
    for (what, r) in [
        ("collapse", w.collapse_range(big, 2048, 2048)),
        ("insert", w.insert_range(big, 2048, 2048)),
    ] {
        assert!(
            matches!(&r, Err(e @ Error::Corrupt { .. }) if e.to_string().contains("checksum")),
            "{what} through a damaged leaf: {r:?}"
        );
    }
    w.close().unwrap();
    let mut after = vec![0u8; 1024];
    dev.read_at(&mut after, leaf * 1024).unwrap();
    assert!(
        after == b,
        "the damaged leaf was rewritten (restamped or changed)"
    );
    let whole = dev.to_vec().unwrap();
    let l = leaf as usize * 1024;
    assert!(whole[l..l + 1024] == before[l..l + 1024]);
    if let Some((clean, _)) = e2fsck_clean(&dev, &dir, "after") {
        assert!(!clean, "the damage must stay visible");
    }
}

#[test]
fn whiteouts_take_the_old_name_in_the_same_operation() {
    let dir = TempDir::new("whiteout");
    let dev = fresh(4096, None, &[]);
    let mut w = WriteFs::open(dev.clone(), opts()).unwrap();
    let a = w.mkdir(ROOT_INO, b"a", &NewNode::dir(0o755)).unwrap();
    let b = w.mkdir(ROOT_INO, b"b", &NewNode::dir(0o755)).unwrap();
    let f = w.create(a, b"f", &NewNode::file(0o644)).unwrap();
    w.write(f, 0, b"contents").unwrap();
    let sub = w.mkdir(a, b"sub", &NewNode::dir(0o700)).unwrap();
    w.create(sub, b"inside", &NewNode::file(0o600)).unwrap();
    let old = w.create(b, b"old", &NewNode::file(0o644)).unwrap();
    let (a_links, b_links) = (
        w.stat(a).unwrap().links_count(),
        w.stat(b).unwrap().links_count(),
    );

    // A file over an existing one, across directories.
    let wh = w
        .rename_whiteout(a, b"f", b, b"old", 1000, 2000)
        .unwrap()
        .unwrap();
    assert_eq!(w.lookup(a, b"f").unwrap(), Some(wh));
    assert_eq!(w.lookup(b, b"old").unwrap(), Some(f));
    let i = w.stat(wh).unwrap();
    assert_eq!(i.mode(), mode::S_IFCHR, "a character device of mode 0");
    assert_eq!((i.uid(), i.gid(), i.links_count()), (1000, 2000, 1));
    assert!(i.i_block[..8].iter().all(|&x| x == 0), "device 0:0");
    assert!(w.stat(old).is_err() || w.stat(old).unwrap().links_count() == 0);

    // A directory to another parent: the links follow it, the whiteout
    // is no directory.
    let wh2 = w
        .rename_whiteout(a, b"sub", b, b"moved", 0, 0)
        .unwrap()
        .unwrap();
    assert_eq!(w.stat(a).unwrap().links_count(), a_links - 1);
    assert_eq!(w.stat(b).unwrap().links_count(), b_links + 1);
    assert_eq!(w.lookup_path("/b/moved/..").ok(), Some(b));
    assert_eq!(w.stat(wh2).unwrap().mode(), mode::S_IFCHR);

    // Two names of one inode: nothing happens, as on the kernel.
    w.link(f, b, b"again").unwrap();
    assert_eq!(
        w.rename_whiteout(b, b"old", b, b"again", 0, 0).unwrap(),
        None
    );
    assert_eq!(w.lookup(b, b"old").unwrap(), Some(f));
    w.close().unwrap();
    if let Some((clean, out)) = e2fsck_clean(&dev, &dir, "whiteouts") {
        assert!(clean, "e2fsck: {out}");
    }
}

#[test]
fn no_inode_for_the_whiteout_changes_nothing() {
    let dev = Arc::new(MemDevice::new(8 << 20));
    let m = MkfsOptions {
        size_bytes: 8 << 20,
        num_inodes: Some(32),
        ..MkfsOptions::reproducible(NOW)
    };
    format(&*dev, &m, true).unwrap();
    let mut w = WriteFs::open(dev, opts()).unwrap();
    let f = w.create(ROOT_INO, b"f", &NewNode::file(0o644)).unwrap();
    let mut k = 0;
    loop {
        match w.create(
            ROOT_INO,
            format!("fill{k}").as_bytes(),
            &NewNode::file(0o644),
        ) {
            Ok(_) => k += 1,
            Err(Error::NoFreeInodes) => break,
            Err(e) => panic!("{e}"),
        }
        assert!(k < 100_000);
    }
    let r = w.rename_whiteout(ROOT_INO, b"f", ROOT_INO, b"g", 0, 0);
    assert!(matches!(r, Err(Error::NoFreeInodes)), "{r:?}");
    assert_eq!(w.lookup(ROOT_INO, b"f").unwrap(), Some(f));
    assert_eq!(w.lookup(ROOT_INO, b"g").unwrap(), None);
    // A plain rename still works.
    w.rename(ROOT_INO, b"f", ROOT_INO, b"g").unwrap();
}
