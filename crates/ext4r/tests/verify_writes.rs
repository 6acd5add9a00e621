//! The write API never builds on metadata that fails its checksum (issue
//! 29): like the kernel (EFSBADCRC), it refuses the change, writes
//! nothing, and leaves the damage for fsck to find.
//!
//! - Regressions: a directory block whose name was altered refuses a new
//!   entry; an inode whose `i_size` was altered refuses `setattr`; the
//!   image stays byte-identical; the read API refuses both too unless
//!   asked not to verify.
//! - A property run: bytes flipped in one metadata block (inode table,
//!   directory leaf or htree node, extent node, xattr block, block and
//!   inode bitmap, group descriptors) of a filled
//!   image, then a random workload through the API; wherever e2fsck found
//!   the damaged image not clean, it must still find it not clean
//!   afterwards (the API never makes a damaged image look clean), and the
//!   API never panics. `EXT4R_VERIFY_CASES` sets the number of cases (CI
//!   runs a few hundred; 5,000 by hand).
#![allow(clippy::unwrap_used)]

mod common;

use common::{missing_tools, run_status, TempDir};
use ext4r::device::{BlockDevice, MemDevice};
use ext4r::fs::{Filesystem, OpenOptions};
use ext4r::mkfs::{format, MkfsOptions};
use ext4r::write::{NewNode, SetAttr, WriteFs, WriteOptions, ROOT_INO};
use ext4r_format::InodeNr;
use std::sync::Arc;

const NOW: i64 = 1_700_000_000;

fn opts() -> WriteOptions {
    let mut o = WriteOptions::default();
    o.now = Some((NOW + 100, 0));
    o
}

/// A 16 MiB filesystem (1 KiB blocks, metadata_csum) holding `/d` with
/// 200 files (an htree), `/big` (a file of many extents: an extent tree
/// with an index), `/x` with an xattr block, and `/small`.
fn filled() -> Arc<MemDevice> {
    let dev = Arc::new(MemDevice::new(16 << 20));
    let m = MkfsOptions {
        size_bytes: 16 << 20,
        block_size: Some(1024),
        ..MkfsOptions::reproducible(NOW)
    };
    format(&*dev, &m, true).unwrap();
    let mut w = WriteFs::open(dev.clone(), opts()).unwrap();
    let d = w.mkdir(ROOT_INO, b"d", &NewNode::dir(0o755)).unwrap();
    for i in 0..200 {
        let f = w
            .create(d, format!("file-{i:04}").as_bytes(), &NewNode::file(0o644))
            .unwrap();
        w.write(f, 0, &[i as u8; 100]).unwrap();
    }
    let big = w.create(ROOT_INO, b"big", &NewNode::file(0o644)).unwrap();
    // Every other block: one extent each, past what the inode holds.
    for k in 0..40u64 {
        w.write(big, k * 2048, &[k as u8; 1024]).unwrap();
    }
    let x = w.create(ROOT_INO, b"x", &NewNode::file(0o600)).unwrap();
    w.set_xattr(x, b"user.a", &[7u8; 600]).unwrap();
    w.set_xattr(x, b"user.b", &[8u8; 300]).unwrap();
    let s = w.create(ROOT_INO, b"small", &NewNode::file(0o644)).unwrap();
    w.write(s, 0, b"hello").unwrap();
    w.close().unwrap();
    dev
}

fn e2fsck_clean(dev: &MemDevice, dir: &TempDir) -> Option<bool> {
    if missing_tools(&["e2fsck"]).is_some() {
        return None;
    }
    let img = dir.join("img");
    dev.save(&img).unwrap();
    let (rc, _, _) = run_status("e2fsck", &["-fn", &img.display().to_string()], &[]).unwrap();
    Some(rc == 0)
}

/// The device block holding the first entry named `name` in directory
/// `dir`, and the byte offset of the name in it.
fn name_place(dev: &MemDevice, dir: &str, name: &[u8]) -> (u64, usize) {
    let fs = Filesystem::open(dev.snapshot()).unwrap();
    let info = fs.resolve(dir).unwrap();
    let bs = u64::from(fs.block_size());
    for r in fs.runs(&info).unwrap() {
        for k in 0..r.len {
            let mut b = vec![0u8; bs as usize];
            dev.read_at(&mut b, (r.physical + k) * bs).unwrap();
            if let Some(at) = b.windows(name.len()).position(|w| w == name) {
                return (r.physical + k, at);
            }
        }
    }
    panic!("{:?} not found", String::from_utf8_lossy(name));
}

#[test]
fn an_altered_name_refuses_a_new_entry_and_writes_nothing() {
    let dev = filled();
    let dir = TempDir::new("verify-name");
    let (blk, at) = name_place(&dev, "/d", b"file-0117");
    dev.write_at(b"F", blk * 1024 + at as u64).unwrap();
    if let Some(clean) = e2fsck_clean(&dev, &dir) {
        assert!(!clean, "e2fsck must see the damage");
    }
    let before = dev.to_vec().unwrap();
    // The read API refuses the block, unless asked not to verify.
    let fs = Filesystem::open(dev.snapshot()).unwrap();
    let err = fs.read_dir_path("/d").unwrap_err();
    assert!(format!("{err}").contains("directory block"), "{err}");
    let mut o = OpenOptions::default();
    o.verify_checksums = false;
    let fs = Filesystem::open_with(dev.snapshot(), o).unwrap();
    assert_eq!(fs.read_dir_path("/d").unwrap().len(), 202);
    // Creating a name that hashes into that leaf, or any name: the leaf
    // is read (and refused) on the way.
    let mut w = WriteFs::open(dev.clone(), opts()).unwrap();
    let d = w.lookup_path("/d");
    let mut refused = 0;
    if let Ok(d) = d {
        for i in 0..50 {
            match w.create(d, format!("new-{i}").as_bytes(), &NewNode::file(0o644)) {
                Err(ext4r::Error::Corrupt { .. }) => refused += 1,
                Err(e) => panic!("unexpected {e}"),
                Ok(_) => {}
            }
        }
    }
    drop(w);
    assert!(refused > 0, "no create was refused");
    // Whatever was created elsewhere was never committed (dropped
    // without close); the damaged block is untouched.
    let mut b = vec![0u8; 1024];
    dev.read_at(&mut b, blk * 1024).unwrap();
    assert_eq!(
        &b[..],
        &before[blk as usize * 1024..blk as usize * 1024 + 1024]
    );
    // Only the refused operations, then close: byte-identical.
    let dev2 = Arc::new(MemDevice::from_bytes(&before));
    let mut w = WriteFs::open(dev2.clone(), opts()).unwrap();
    let d = w.lookup_path("/d").unwrap_or(0);
    let r = w.create(d, b"file-0117x", &NewNode::file(0o644));
    let r2 = w.unlink(d, b"file-0117");
    assert!(r.is_err() || r2.is_err());
    if r.is_err() && r2.is_err() {
        w.close().unwrap();
        assert!(dev2.to_vec().unwrap() == before, "a refused change wrote");
    }
    if let Some(clean) = e2fsck_clean(&dev, &dir) {
        assert!(!clean, "the damage must stay visible");
    }
}

/// A block bitmap that fails its checksum (e2fsck's f_bad_bmap_csum
/// class): like the kernel, the writer never allocates from that group and
/// never rewrites the bitmap; freeing blocks into it is refused as
/// corruption. The damaged bitmap stays byte for byte, e2fsck still sees it.
#[test]
fn a_bitmap_failing_its_checksum_is_never_rewritten() {
    let dev = filled();
    let dir = TempDir::new("verify-bitmap");
    let fs = Filesystem::open(dev.snapshot()).unwrap();
    let bb = fs
        .group_desc(ext4r_format::GroupNr(0))
        .unwrap()
        .block_bitmap(true);
    drop(fs);
    // A used block of group 0 marked free in its bitmap.
    let at = bb * 1024 + 40;
    let mut byte = [0u8; 1];
    dev.read_at(&mut byte, at).unwrap();
    byte[0] ^= 0x10;
    dev.write_at(&byte, at).unwrap();
    if let Some(clean) = e2fsck_clean(&dev, &dir) {
        assert!(!clean, "e2fsck must see the damage");
    }
    let bitmap_before = dev.to_vec().unwrap()[bb as usize * 1024..][..1024].to_vec();
    let mut w = WriteFs::open(dev.clone(), opts()).unwrap();
    // New data goes to the other group.
    let f = w.create(ROOT_INO, b"new", &NewNode::file(0o644)).unwrap();
    w.write(f, 0, &[5u8; 4096]).unwrap();
    // Freeing /big's blocks (in group 0) would edit the bitmap: refused.
    let big = w.lookup_path("/big").unwrap();
    match w.truncate(big, 0) {
        Err(ext4r::Error::Corrupt { location, .. }) => {
            assert!(location.what.contains("block bitmap"), "{location}");
        }
        other => panic!("freeing into the damaged group: {other:?}"),
    }
    drop(w);
    let mut w = WriteFs::open(dev.clone(), opts()).unwrap();
    let f = w.create(ROOT_INO, b"new2", &NewNode::file(0o644)).unwrap();
    w.write(f, 0, &[6u8; 2048]).unwrap();
    w.close().unwrap();
    assert_eq!(
        dev.to_vec().unwrap()[bb as usize * 1024..][..1024],
        bitmap_before[..],
        "the damaged bitmap was rewritten"
    );
    if let Some(clean) = e2fsck_clean(&dev, &dir) {
        assert!(!clean, "the damage must stay visible");
    }
}

/// A descriptor placing its inode table outside the filesystem or over
/// the superblock (e2fsck's f_illitable and f_badroot class), or failing
/// its own checksum: refused at open, as the kernel refuses a read-write
/// mount, and nothing is written.
#[test]
fn descriptors_the_kernel_would_not_mount_are_refused_at_open() {
    let base = filled();
    let pristine = base.to_vec().unwrap();
    // Group 0's descriptor sits at the start of block 2 (1 KiB blocks):
    // bg_inode_table_lo at 8, bg_checksum at 0x1e.
    for (what, off, bytes) in [
        (
            "inode table past the end",
            8usize,
            0x00ff_ffffu32.to_le_bytes().to_vec(),
        ),
        (
            "inode table on the superblock",
            8,
            1u32.to_le_bytes().to_vec(),
        ),
        (
            "block bitmap on the descriptors",
            0,
            2u32.to_le_bytes().to_vec(),
        ),
        ("descriptor checksum", 0x1e, vec![0x5a, 0xa5]),
    ] {
        let dev = Arc::new(MemDevice::from_bytes(&pristine));
        dev.write_at(&bytes, 2 * 1024 + off as u64).unwrap();
        let before = dev.to_vec().unwrap();
        // (A bad inode table is found by the journal inode's read already.)
        match WriteFs::open(dev.clone(), opts()) {
            Err(ext4r::Error::Corrupt { .. }) => {}
            Err(e) => panic!("{what}: {e}"),
            Ok(_) => panic!("{what}: opened for writing"),
        }
        assert!(dev.to_vec().unwrap() == before, "{what}: the refusal wrote");
    }
}

/// A primary superblock whose bytes changed without its checksum (found
/// by `cargo xtask damage --mount`): the kernel refuses to mount it, and
/// so do both faces of the library, and nothing is written. Rewriting it
/// on close would have restamped a good checksum over the damage.
#[test]
fn a_superblock_failing_its_checksum_is_refused_at_open() {
    let dev = filled();
    // s_state (offset 0x3a of the superblock at byte 1024): 1 -> 4185.
    dev.write_at(&4185u16.to_le_bytes(), 1024 + 0x3a).unwrap();
    let before = dev.to_vec().unwrap();
    match WriteFs::open(dev.clone(), opts()) {
        Err(ext4r::Error::Corrupt { .. }) => {}
        Err(e) => panic!("unexpected {e}"),
        Ok(_) => panic!("opened for writing"),
    }
    let err = Filesystem::open(dev.snapshot()).unwrap_err();
    assert!(format!("{err}").contains("superblock"), "{err}");
    // Unverified (salvage, fsck), it still opens.
    let mut o = OpenOptions::default();
    o.verify_checksums = false;
    assert!(Filesystem::open_with(dev.snapshot(), o).is_ok());
    assert!(dev.to_vec().unwrap() == before, "the refusal wrote");
}

/// An htree root that cannot be followed (found by `cargo xtask damage
/// --mount`): a new name in that directory is refused as corruption, the
/// directory keeps its index and e2fsck still sees the damage. The kernel
/// refuses it with metadata_csum; without, it drops the index, which
/// would hide the damage, so we refuse there too.
#[test]
fn a_damaged_htree_root_refuses_a_new_entry() {
    for csum in [true, false] {
        let dev = Arc::new(MemDevice::new(16 << 20));
        let mut m = MkfsOptions {
            size_bytes: 16 << 20,
            block_size: Some(1024),
            ..MkfsOptions::reproducible(NOW)
        };
        if !csum {
            m.features = vec!["^metadata_csum".into()];
        }
        format(&*dev, &m, true).unwrap();
        let mut w = WriteFs::open(dev.clone(), opts()).unwrap();
        let d = w.mkdir(ROOT_INO, b"d", &NewNode::dir(0o755)).unwrap();
        for i in 0..200 {
            w.create(d, format!("file-{i:04}").as_bytes(), &NewNode::file(0o644))
                .unwrap();
        }
        w.close().unwrap();
        let fs = Filesystem::open(dev.snapshot()).unwrap();
        let info = fs.resolve("/d").unwrap();
        assert!(info.inode.flags().contains(ext4r::InodeFlags::INDEX));
        let root = fs.runs(&info).unwrap()[0].physical;
        drop(fs);
        // dx_root_info.indirect_levels (byte 0x1e of block 0): 0 -> 3.
        // With metadata_csum the dx tail's checksum no longer matches
        // either; without, only the index rule catches it.
        let mut b = vec![0u8; 1024];
        dev.read_at(&mut b, root * 1024).unwrap();
        b[0x1e] = 3;
        dev.write_at(&b, root * 1024).unwrap();
        let before = dev.to_vec().unwrap();
        let mut w = WriteFs::open(dev.clone(), opts()).unwrap();
        match w.create(d, b"new-name", &NewNode::file(0o644)) {
            Err(ext4r::Error::Corrupt { .. }) => {}
            Err(e) => panic!("csum {csum}: unexpected {e}"),
            Ok(_) => panic!("csum {csum}: created through a damaged index"),
        }
        w.close().unwrap();
        assert!(
            dev.to_vec().unwrap() == before,
            "csum {csum}: the refusal wrote"
        );
        let fs = Filesystem::open_with(dev.snapshot(), {
            let mut o = OpenOptions::default();
            o.verify_checksums = false;
            o
        })
        .unwrap();
        let info = fs.resolve("/d").unwrap();
        assert!(
            info.inode.flags().contains(ext4r::InodeFlags::INDEX),
            "csum {csum}: index dropped"
        );
    }
}

#[test]
fn an_altered_size_refuses_setattr_and_writes_nothing() {
    let dev = filled();
    let dir = TempDir::new("verify-size");
    let fs = Filesystem::open(dev.snapshot()).unwrap();
    let small = fs.resolve("/small").unwrap().ino;
    let (blk, off) = {
        let g = fs.geometry();
        let ipg = g.inodes_per_group;
        let d = fs
            .group_desc(ext4r_format::GroupNr((small.0 - 1) / ipg))
            .unwrap();
        let byte = u64::from((small.0 - 1) % ipg) * u64::from(g.inode_size);
        (d.inode_table(true) + byte / 1024, (byte % 1024) as usize)
    };
    drop(fs);
    // i_size_lo at byte 4 of the record.
    let at = blk * 1024 + off as u64 + 4;
    dev.write_at(&[0x99], at).unwrap();
    let before = dev.to_vec().unwrap();
    let fs = Filesystem::open(dev.snapshot()).unwrap();
    assert!(fs.inode(small).is_err(), "the read API refuses the inode");
    drop(fs);
    let mut w = WriteFs::open(dev.clone(), opts()).unwrap();
    let mut a = SetAttr::default();
    a.perm = Some(0o600);
    let e = w.setattr(small.0, &a).unwrap_err();
    assert!(matches!(e, ext4r::Error::Corrupt { .. }), "{e}");
    assert!(w.write(small.0, 0, b"x").is_err());
    assert!(w.unlink(ROOT_INO, b"small").is_err());
    w.close().unwrap();
    assert!(dev.to_vec().unwrap() == before, "a refused change wrote");
    if let Some(clean) = e2fsck_clean(&dev, &dir) {
        assert!(!clean, "the damage must stay visible");
    }
    let _ = InodeNr(0);
}

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

/// Metadata blocks of the filled image: inode table blocks in use,
/// directory blocks, extent nodes, xattr blocks.
fn metadata_blocks(dev: &MemDevice) -> Vec<u64> {
    let mut o = OpenOptions::default();
    o.verify_checksums = false;
    let fs = Filesystem::open_with(dev.snapshot(), o).unwrap();
    let mut out = Vec::new();
    let g0 = fs.group_desc(ext4r_format::GroupNr(0)).unwrap();
    let it = g0.inode_table(true);
    out.extend(it..it + 16);
    // The bitmaps and the descriptor block (after the superblock's).
    out.push(g0.block_bitmap(true));
    out.push(g0.inode_bitmap(true));
    out.push(2);
    for p in ["/", "/d"] {
        let info = fs.resolve(p).unwrap();
        for r in fs.runs(&info).unwrap() {
            out.extend(r.physical..r.physical + r.len);
        }
    }
    for p in ["/big", "/x"] {
        let info = fs.resolve(p).unwrap();
        let acl = info.inode.file_acl(true).0;
        if acl != 0 {
            out.push(acl);
        }
        let data: std::collections::BTreeSet<u64> = fs
            .runs(&info)
            .unwrap()
            .iter()
            .flat_map(|r| r.physical..r.physical + r.len)
            .collect();
        let all = ext4r_txn::map::all_blocks(&fs, info.ino.0, &info.inode).unwrap();
        out.extend(all.into_iter().filter(|b| !data.contains(b)));
    }
    out
}

#[test]
fn damaged_metadata_never_looks_clean_after_the_api() {
    if missing_tools(&["e2fsck"]).is_some() {
        eprintln!("skipped: e2fsck not found");
        return;
    }
    let cases: u64 = std::env::var("EXT4R_VERIFY_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let base = filled();
    let pristine = base.to_vec().unwrap();
    let meta = metadata_blocks(&base);
    let dir = TempDir::new("verify-prop");
    let (mut judged, mut refusals, mut laundered) = (0u64, 0u64, Vec::new());
    for case in 0..cases {
        let mut r = Rng(0x9e37_79b9_7f4a_7c15 ^ (case + 1).wrapping_mul(0x2545_f491));
        let dev = Arc::new(MemDevice::from_bytes(&pristine));
        let blk = meta[r.below(meta.len() as u64) as usize];
        for _ in 0..1 + r.below(3) {
            let at = blk * 1024 + r.below(1024);
            let mut b = [0u8; 1];
            dev.read_at(&mut b, at).unwrap();
            b[0] ^= (1 + r.below(255)) as u8;
            dev.write_at(&b, at).unwrap();
        }
        if e2fsck_clean(&dev, &dir) != Some(false) {
            continue; // a harmless flip: nothing to hide
        }
        judged += 1;
        if let Ok(mut w) = WriteFs::open(dev.clone(), opts()) {
            for step in 0..12 {
                let names = ["d", "big", "x", "small"];
                let pick = names[r.below(4) as usize];
                let res = match r.below(7) {
                    0 => w.lookup_path(format!("/{pick}")).and_then(|p| {
                        w.create(p, format!("n{step}").as_bytes(), &NewNode::file(0o644))
                            .map(|_| ())
                    }),
                    1 => w
                        .lookup_path(format!("/{pick}"))
                        .and_then(|i| w.write(i, r.below(9000), &[1u8; 700]).map(|_| ())),
                    2 => w.lookup_path(format!("/{pick}")).and_then(|i| {
                        let mut a = SetAttr::default();
                        a.perm = Some(0o640);
                        w.setattr(i, &a)
                    }),
                    3 => w.unlink(
                        w.lookup_path("/d").unwrap_or(ROOT_INO),
                        format!("file-{:04}", r.below(200)).as_bytes(),
                    ),
                    4 => w.rename(ROOT_INO, pick.as_bytes(), ROOT_INO, b"moved"),
                    5 => w
                        .lookup_path(format!("/{pick}"))
                        .and_then(|i| w.set_xattr(i, b"user.z", &[3u8; 100])),
                    _ => w
                        .lookup_path(format!("/{pick}"))
                        .and_then(|i| w.truncate(i, r.below(5000))),
                };
                if matches!(res, Err(ext4r::Error::Corrupt { .. })) {
                    refusals += 1;
                }
            }
            let _ = w.close();
        }
        if e2fsck_clean(&dev, &dir) == Some(true) {
            laundered.push(format!("case {case}: block {blk}"));
        }
    }
    eprintln!(
        "{cases} cases, {judged} damaged (e2fsck not clean), {refusals} operations refused as corrupt, {} made clean",
        laundered.len()
    );
    assert!(
        laundered.is_empty(),
        "the API made damage look clean: {laundered:?}"
    );
    assert!(judged > cases / 4, "too few damaged cases to mean anything");
}
