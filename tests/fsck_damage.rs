//! fsck.ext4r's repair never loses what e2fsck's keeps (issue 13): a
//! kernel-filled image per configuration, one damage per case applied to
//! two copies, `ext4r fsck -fy` on one and `e2fsck -fy` on the other.
//! Then, wherever e2fsck's own repair is clean: ours must be clean under
//! `e2fsck -fn` and under a second `ext4r fsck -fn`; and every file
//! e2fsck's repair left intact (same path, same contents, read back by
//! debugfs) must be intact after ours.
//!
//! Each test covers one class of damage across block sizes and feature
//! sets, varying the field, value and place (CI tries each damage on half
//! of the configurations; `EXT4R_DAMAGE_CASES=all` on all of them).
//! `EXT4R_FSCK_BIN` names another `ext4r` binary to judge (an older
//! build, say).

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::tree::fnv;
use common::*;
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;

fn ext4r() -> Command {
    match std::env::var_os("EXT4R_FSCK_BIN") {
        Some(bin) => Command::new(bin),
        None => Command::new(env!("CARGO_BIN_EXE_ext4r")),
    }
}

/// A filesystem configuration: mke2fs arguments and image size.
#[derive(Clone, Copy)]
struct Cfg {
    name: &'static str,
    args: &'static [&'static str],
    size: &'static str,
}

const EXT4: Cfg = Cfg {
    name: "ext4",
    args: &["-t", "ext4", "-b", "4096"],
    size: "512M",
};
const EXT4_NOCSUM: Cfg = Cfg {
    name: "ext4 ^metadata_csum,uninit_bg",
    args: &["-t", "ext4", "-b", "4096", "-O", "^metadata_csum,uninit_bg"],
    size: "512M",
};
const EXT3: Cfg = Cfg {
    name: "ext3 1k",
    args: &["-t", "ext3", "-b", "1024"],
    size: "128M",
};
const EXT4_1K_INLINE: Cfg = Cfg {
    name: "ext4 1k inline_data",
    args: &["-t", "ext4", "-b", "1024", "-O", "inline_data"],
    size: "128M",
};
const BIGALLOC: Cfg = Cfg {
    name: "ext4 bigalloc",
    args: &["-t", "ext4", "-b", "4096", "-O", "bigalloc", "-C", "16384"],
    size: "512M",
};
const EXT2: Cfg = Cfg {
    name: "ext2 1k",
    args: &["-t", "ext2", "-b", "1024"],
    size: "128M",
};

/// What the kernel writes: directories of small files (one large enough
/// for an htree), a shared xattr block, hard links, symlinks, a sparse
/// file, two files written in turns (extent trees with a leaf block each)
/// and a large one.
fn workload(root: &Path) {
    for d in 0..4 {
        fs::create_dir_all(root.join(format!("d{d}/sub"))).unwrap();
        for i in 0..100u32 {
            let n = [0, 10, 60, 100, 500, 3000, 9000, 20000][(i as usize * 7 + d) % 8];
            let data: Vec<u8> = (0..n)
                .map(|x| (x as u32 * 7 + i + d as u32) as u8)
                .collect();
            fs::write(root.join(format!("d{d}/f{i}")), data).unwrap();
        }
        for i in 0..8 {
            std::os::unix::fs::symlink(
                "t".repeat([5, 70, 200][i % 3]),
                root.join(format!("d{d}/sub/l{i}")),
            )
            .unwrap();
        }
    }
    fs::create_dir(root.join("big")).unwrap();
    for i in 0..500 {
        fs::write(
            root.join(format!("big/name-with-a-long-prefix-{i:05}")),
            format!("{i}").repeat(10),
        )
        .unwrap();
    }
    // The same value on several files: the kernel shares one block.
    let value = vec![b'v'; 600];
    for i in 0..10 {
        rustix::fs::setxattr(
            root.join(format!("d0/f{i}")),
            "user.shared",
            &value,
            rustix::fs::XattrFlags::empty(),
        )
        .unwrap();
    }
    for i in 0..5 {
        fs::hard_link(
            root.join(format!("d1/f{i}")),
            root.join(format!("d1/hl{i}")),
        )
        .unwrap();
    }
    let sparse = fs::File::create(root.join("sparse")).unwrap();
    sparse.write_all_at(b"tail", 5 << 20).unwrap();
    sparse.write_all_at(b"mid", 1 << 20).unwrap();
    let (a, b) = (
        fs::File::create(root.join("frag")).unwrap(),
        fs::File::create(root.join("frag2")).unwrap(),
    );
    // Written in turns and synced, and with a hole after each piece: the
    // holes alone give each file 40 extents, so both have an extent tree
    // with a leaf block however the allocator places the pieces.
    for k in 0..40u8 {
        let at = u64::from(k);
        a.write_all_at(&vec![k; 8192], at * 16384).unwrap();
        a.sync_all().unwrap();
        b.write_all_at(&vec![!k; 4096], at * 8192).unwrap();
        b.sync_all().unwrap();
    }
    let big: Vec<u8> = (0..3u32 << 20)
        .map(|x| (x.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    fs::write(root.join("large"), big).unwrap();
}

/// path -> hash of the contents (of the target, for a symlink), as
/// debugfs reads the image back.
type Manifest = BTreeMap<String, u64>;

fn manifest(dir: &TempDir, img: &Path) -> Manifest {
    let out = dir.path("rdump");
    let _ = fs::remove_dir_all(&out);
    fs::create_dir_all(&out).unwrap();
    run(Command::new("debugfs")
        .args(["-R", &format!("rdump / {}", out.display())])
        .arg(img));
    let mut m = BTreeMap::new();
    let mut stack = vec![out.clone()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            let rel = p.strip_prefix(&out).unwrap().display().to_string();
            match fs::symlink_metadata(&p) {
                Ok(md) if md.is_dir() => stack.push(p),
                Ok(md) if md.file_type().is_symlink() => {
                    let t = fs::read_link(&p).unwrap_or_default();
                    m.insert(rel, fnv(t.as_os_str().as_encoded_bytes()));
                }
                Ok(_) => {
                    m.insert(rel, fs::read(&p).map_or(u64::MAX, |d| fnv(&d)));
                }
                Err(_) => {}
            }
        }
    }
    let _ = fs::remove_dir_all(&out);
    m
}

/// A populated image of one configuration and what it holds.
struct Base {
    cfg: Cfg,
    img: PathBuf,
    files: Manifest,
}

fn base(dir: &TempDir, cfg: Cfg) -> Base {
    let img = dir.path(&format!(
        "base-{}.img",
        cfg.name.replace([' ', '^', ','], "_")
    ));
    make_image(Command::new("mke2fs"), cfg.args, &img, cfg.size).unwrap();
    let mnt = dir.path("mnt");
    let mut lm = LoopMount::new(&img, &mnt).unwrap();
    workload(&mnt);
    lm.umount().unwrap();
    drop(lm);
    let files = manifest(dir, &img);
    Base { cfg, img, files }
}

/// Whether the tools this test needs are here (else it says why).
fn ready() -> bool {
    if !is_root() || !have("losetup") || !have("debugfs") || !have("e2fsck") {
        eprintln!("SKIP: needs root, losetup, debugfs and e2fsck");
        return false;
    }
    true
}

/// What a damage does to an image.
type DamageFn = Box<dyn Fn(&Path)>;

/// A damage: a name and what it does to an image.
type Damage<'a> = (String, Box<dyn Fn(&Path) + 'a>);

/// Runs one case; the failure, if any.
fn judge(dir: &TempDir, b: &Base, name: &str, damage: &dyn Fn(&Path)) -> Option<String> {
    let (ours, theirs) = (dir.path("ours.img"), dir.path("theirs.img"));
    copy_sparse(&b.img, &ours).unwrap();
    damage(&ours);
    copy_sparse(&ours, &theirs).unwrap();
    let o = run(ext4r().args(["fsck", "-fy"]).arg(&ours));
    run(Command::new("e2fsck").arg("-fy").arg(&theirs));
    let (ours_after, out) = e2fsck_fn(&ours);
    let (theirs_after, _) = e2fsck_fn(&theirs);
    let again = run(ext4r().args(["fsck", "-fn"]).arg(&ours)).status.code();
    let (mo, mt) = (manifest(dir, &ours), manifest(dir, &theirs));
    let lost: Vec<&String> = b
        .files
        .iter()
        .filter(|(k, v)| mt.get(*k) == Some(v) && mo.get(*k) != Some(v))
        .map(|(k, _)| k)
        .collect();
    let mut why = Vec::new();
    if theirs_after == 0 && ours_after != 0 {
        why.push(format!("e2fsck -fn after our repair exits {ours_after}"));
    }
    if theirs_after == 0 && again != Some(0) {
        why.push(format!("our second -fn exits {again:?}"));
    }
    if !lost.is_empty() {
        why.push(format!(
            "{} files intact after e2fsck's repair are not after ours: {:?}",
            lost.len(),
            &lost[..lost.len().min(5)]
        ));
    }
    let verdict = format!("{} / {name}", b.cfg.name);
    if why.is_empty() {
        println!("ok: {verdict}");
        return None;
    }
    println!(
        "FAILED: {verdict}: {}\n{}\n{out}",
        why.join("; "),
        String::from_utf8_lossy(&o.stdout)
    );
    Some(format!("{verdict}: {}", why.join("; ")))
}

/// Runs the damages on the bases; panics with the failures. CI runs each
/// damage on every other base (the bases alternating, so every base and
/// every damage is still tried); `EXT4R_DAMAGE_CASES=all` runs every
/// damage on every base.
fn judge_all(dir: &TempDir, bases: &[Base], damages: impl Fn(&Base) -> Vec<Damage<'static>>) {
    let all = std::env::var("EXT4R_DAMAGE_CASES").is_ok_and(|v| v == "all");
    let mut failed = Vec::new();
    let mut n = 0;
    for (bi, b) in bases.iter().enumerate() {
        for (di, (name, d)) in damages(b).into_iter().enumerate() {
            if !all && (bi + di) % 2 == 1 {
                continue;
            }
            n += 1;
            failed.extend(judge(dir, b, &name, &*d));
        }
    }
    println!("{}/{n} cases kept what e2fsck keeps", n - failed.len());
    assert!(failed.is_empty(), "failed:\n{}", failed.join("\n"));
}

// ---- reading and poking an image ----

fn debugfs_out(img: &Path, cmd: &str) -> String {
    let o = run(Command::new("debugfs").args(["-R", cmd]).arg(img));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn debugfs_w(img: &Path, cmd: &str) {
    let o = run(Command::new("debugfs").args(["-w", "-R", cmd]).arg(img));
    assert!(o.status.success(), "debugfs {cmd}: {o:?}");
}

fn poke(img: &Path, offset: u64, bytes: &[u8]) {
    let f = fs::OpenOptions::new().write(true).open(img).unwrap();
    f.write_all_at(bytes, offset).unwrap();
}

fn peek(img: &Path, offset: u64, n: usize) -> Vec<u8> {
    let f = fs::File::open(img).unwrap();
    let mut buf = vec![0u8; n];
    f.read_exact_at(&mut buf, offset).unwrap();
    buf
}

/// A number after `key` in dumpe2fs -h's output.
fn sb_field(img: &Path, key: &str) -> u64 {
    let o = run(Command::new("dumpe2fs").arg("-h").arg(img));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {key} in dumpe2fs -h"))
}

fn block_size(img: &Path) -> u64 {
    sb_field(img, "Block size:")
}

fn first_data_block(img: &Path) -> u64 {
    sb_field(img, "First block:")
}

fn desc_size(img: &Path) -> u64 {
    let o = run(Command::new("dumpe2fs").arg("-h").arg(img));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("Group descriptor size:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(32)
}

/// Byte offset of group `g`'s primary descriptor.
fn desc_at(img: &Path, g: u64) -> u64 {
    (first_data_block(img) + 1) * block_size(img) + g * desc_size(img)
}

/// The first block of group 0's inode table.
fn inode_table(img: &Path) -> u64 {
    let o = run(Command::new("dumpe2fs").arg(img));
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let at = text.find("Inode table at ").unwrap() + "Inode table at ".len();
    text[at..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

fn inum(img: &Path, path: &str) -> u64 {
    let text = debugfs_out(img, &format!("stat {path}"));
    let rest = text.split("Inode: ").nth(1).unwrap();
    rest.split_whitespace().next().unwrap().parse().unwrap()
}

/// Byte offset of an inode's record.
fn inode_at(img: &Path, ino: u64) -> u64 {
    let text = debugfs_out(img, &format!("imap <{ino}>"));
    let blk: u64 = text
        .split("located at block ")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .and_then(|v| v.trim().parse().ok())
        .unwrap();
    let off = text
        .split("offset 0x")
        .nth(1)
        .and_then(|r| u64::from_str_radix(r.trim().trim_end_matches('.'), 16).ok())
        .unwrap();
    blk * block_size(img) + off
}

/// The leaf block of `path`'s depth-1 extent tree.
fn extent_leaf(img: &Path, path: &str) -> u64 {
    let d = debugfs_out(img, &format!("ex {path}"));
    let line = d
        .lines()
        .find(|l| l.trim_start().starts_with("0/ 1"))
        .unwrap_or_else(|| panic!("{path} has no depth-1 tree:\n{d}"));
    let f: Vec<&str> = line.split_whitespace().collect();
    let dash = f.iter().position(|x| *x == "-").unwrap();
    f[dash + 2].parse().unwrap()
}

fn uses_extents(b: &Base) -> bool {
    b.cfg.args.contains(&"ext4")
}

// ---- the eight classes of issue 13 ----

/// A directory's or a file's block pointer damaged to name filesystem
/// metadata (superblock, descriptors, an inode table): e2fsck clones the
/// blocks ("shared with the filesystem metadata"); a repair must never
/// write the file's contents over the metadata (it zeroed
/// s_inodes_count, and salvaged live inodes as directory entries).
#[test]
fn blocks_shared_with_metadata_are_cloned_not_written_over() {
    if !ready() {
        return;
    }
    let dir = TempDir::new("damage-meta");
    let bases: Vec<Base> = [EXT4, EXT3, EXT4_1K_INLINE, BIGALLOC]
        .into_iter()
        .map(|c| base(&dir, c))
        .collect();
    judge_all(&dir, &bases, |b| {
        // The first data pointer: an extent's start, or i_block[0].
        let word = if uses_extents(b) { 5 } else { 0 };
        let fdb = first_data_block(&b.img);
        let itable = inode_table(&b.img);
        let mut v: Vec<Damage<'static>> = Vec::new();
        for (what, target) in [
            ("the superblock", fdb),
            ("a descriptor block", fdb + 1),
            ("the inode table", itable),
            ("the inode table's third block", itable + 2),
        ] {
            for path in ["/d3", "/large"] {
                v.push((
                    format!("{path}'s first block pointer names {what} ({target})"),
                    Box::new(move |img: &Path| {
                        debugfs_w(img, &format!("sif {path} block[{word}] {target}"));
                    }),
                ));
            }
        }
        v
    });
}

/// Group descriptor damage (issue 13's bg_flags = 0xffff on bigalloc,
/// bg_itable_unused_hi = 0xffff on 1 KiB blocks, flipped bits without
/// metadata_csum, and uninit flags or unused counts that are wrong with a
/// valid checksum): no inode table that holds inodes may go unread.
#[test]
fn damaged_group_descriptors_keep_every_file() {
    if !ready() {
        return;
    }
    let dir = TempDir::new("damage-desc");
    let bases: Vec<Base> = [BIGALLOC, EXT4_1K_INLINE, EXT4_NOCSUM, EXT4]
        .into_iter()
        .map(|c| base(&dir, c))
        .collect();
    judge_all(&dir, &bases, |b| {
        let mut v: Vec<Damage<'static>> = Vec::new();
        for g in [0u64, 1] {
            v.push((
                format!("group {g}: bg_flags = 0xffff"),
                Box::new(move |img: &Path| poke(img, desc_at(img, g) + 0x12, &[0xff, 0xff])),
            ));
            v.push((
                format!("group {g}: bg_itable_unused = 0xffff (low half)"),
                Box::new(move |img: &Path| poke(img, desc_at(img, g) + 0x1c, &[0xff, 0xff])),
            ));
        }
        if desc_size(&b.img) >= 64 {
            v.push((
                "group 0: bg_itable_unused_hi = 0xffff".into(),
                Box::new(|img: &Path| poke(img, desc_at(img, 0) + 0x32, &[0xff, 0xff])),
            ));
        }
        // Checksums kept valid by debugfs: only the evidence of the
        // inode table can show the descriptor wrong.
        v.push((
            "group 0 flagged INODE_UNINIT (checksum valid)".into(),
            Box::new(|img: &Path| debugfs_w(img, "set_bg 0 flags 1")),
        ));
        v.push((
            "group 0 itable_unused = inodes per group (checksum valid)".into(),
            Box::new(|img: &Path| {
                let ipg = sb_field(img, "Inodes per group:");
                debugfs_w(img, &format!("set_bg 0 itable_unused {ipg}"));
            }),
        ));
        for seed in 0..4u64 {
            v.push((
                format!("group 0: four bits flipped (seed {seed})"),
                Box::new(move |img: &Path| {
                    let at = desc_at(img, 0);
                    let n = desc_size(img);
                    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
                    for _ in 0..4 {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        // Not the checksum itself (a flip there alone is
                        // the descriptor-checksum case).
                        let bit = x % ((n - 2) * 8);
                        let byte = if bit / 8 >= 0x1e {
                            bit / 8 + 2
                        } else {
                            bit / 8
                        };
                        let old = peek(img, at + byte, 1)[0];
                        poke(img, at + byte, &[old ^ (1 << (bit % 8))]);
                    }
                }),
            ));
        }
        v
    });
}

/// Superblock fields e2fsck repairs from what the filesystem shows or by
/// going to a backup: a checksum that fails (any field changed on a
/// metadata_csum filesystem), feature words zeroed, a journal inode that
/// names an ordinary file, s_reserved_gdt_blocks set to random values.
#[test]
fn damaged_superblock_fields_are_repaired_as_e2fsck_repairs_them() {
    if !ready() {
        return;
    }
    let dir = TempDir::new("damage-super");
    let bases: Vec<Base> = [EXT4, EXT4_NOCSUM, EXT3, EXT2]
        .into_iter()
        .map(|c| base(&dir, c))
        .collect();
    judge_all(&dir, &bases, |b| {
        let sb = |at: u64, bytes: Vec<u8>| -> Box<dyn Fn(&Path)> {
            Box::new(move |img: &Path| poke(img, 1024 + at, &bytes))
        };
        let mut v: Vec<Damage<'static>> = vec![
            ("s_mnt_count = 0".into(), sb(0x34, vec![0, 0])),
            ("s_feature_compat = 0".into(), sb(0x5c, vec![0; 4])),
            ("s_feature_ro_compat = 0".into(), sb(0x64, vec![0; 4])),
            (
                "s_journal_inum = 13".into(),
                sb(0xe0, 13u32.to_le_bytes().to_vec()),
            ),
        ];
        let _ = b;
        for r in [1u16, 7, 255, 1000, 40000] {
            v.push((
                format!("s_reserved_gdt_blocks = {r}"),
                sb(0xce, r.to_le_bytes().to_vec()),
            ));
        }
        v
    });
}

/// A 64bit superblock whose descriptor size is under 64 bytes: the kernel
/// and libext2fs refuse it, and e2fsck checks from the backup superblock
/// the primary's own geometry points at (group 1's first block). With
/// bigalloc that is the only place a backup is found (group 1 starts at
/// `s_blocks_per_group`, not at 8 × the block size); reading the table
/// 32 bytes apart lost every file.
#[test]
fn a_bad_descriptor_size_is_checked_from_the_backup() {
    if !ready() {
        return;
    }
    let dir = TempDir::new("damage-descsize");
    let bases: Vec<Base> = [BIGALLOC, EXT4]
        .into_iter()
        .map(|c| base(&dir, c))
        .collect();
    judge_all(&dir, &bases, |_| {
        [32u16, 48]
            .into_iter()
            .map(|ds| -> Damage<'static> {
                (
                    format!("s_desc_size = {ds}"),
                    Box::new(move |img: &Path| poke(img, 1024 + 0xfe, &ds.to_le_bytes())),
                )
            })
            .collect()
    });
}

/// Extent headers whose depth disagrees with the tree, in the root and in
/// a leaf block: e2fsck walks by the root's depth and keeps the extents;
/// a root depth the entries contradict is read at the depth they show.
#[test]
fn extent_headers_with_a_bad_depth_keep_the_file() {
    if !ready() {
        return;
    }
    let dir = TempDir::new("damage-depth");
    let bases: Vec<Base> = [EXT4, EXT4_NOCSUM, BIGALLOC, EXT4_1K_INLINE]
        .into_iter()
        .map(|c| base(&dir, c))
        .collect();
    judge_all(&dir, &bases, |b| {
        let mut v: Vec<Damage<'static>> = Vec::new();
        for depth in [0u16, 1, 3, 5, 9] {
            v.push((
                format!("/frag's leaf block says depth {depth}"),
                Box::new(move |img: &Path| {
                    let leaf = extent_leaf(img, "/frag");
                    poke(img, leaf * block_size(img) + 6, &depth.to_le_bytes());
                }),
            ));
        }
        for (path, depth) in [("/frag", 0u16), ("/frag", 2), ("/frag2", 3), ("/large", 1)] {
            v.push((
                format!("{path}'s root says depth {depth}"),
                Box::new(move |img: &Path| {
                    let at = inode_at(img, inum(img, path)) + 0x28 + 6;
                    poke(img, at, &depth.to_le_bytes());
                }),
            ));
        }
        let _ = b;
        v
    });
}

/// A directory whose only extent (in the inode) starts at a logical
/// block other than 0: e2fsck moves the blocks down to start at 0
/// (PR_1_COLLAPSE_DBLOCK) and keeps every entry. The size and the htree
/// root must be judged on the map as the collapse leaves it: judged on
/// the old one, /big's index was cleared "for want of a block 0" and its
/// entries lost (damage seed 8 case 48: 94 files).
#[test]
fn a_directory_extent_off_block_zero_is_collapsed_and_kept() {
    if !ready() {
        return;
    }
    let dir = TempDir::new("damage-collapse");
    let bases: Vec<Base> = [EXT4, EXT4_NOCSUM, BIGALLOC, EXT4_1K_INLINE]
        .into_iter()
        .map(|c| base(&dir, c))
        .collect();
    judge_all(&dir, &bases, |_| {
        let mut v: Vec<Damage<'static>> = Vec::new();
        for path in ["/big", "/d2", "/d3/sub"] {
            for logical in [1u32, 11, 1000] {
                v.push((
                    format!("{path}'s extent starts at logical block {logical}"),
                    Box::new(move |img: &Path| {
                        let at = inode_at(img, inum(img, path)) + 0x28;
                        let h = peek(img, at, 12);
                        // An extent header (not inline data) with one
                        // entry at depth 0, or the case does not apply.
                        if h[0..2] != [0x0a, 0xf3] || h[2..4] != [1, 0] || h[6..8] != [0, 0] {
                            // The indexed one is the case this guards.
                            assert!(path != "/big", "/big is not one extent: {h:02x?}");
                            return;
                        }
                        // i_block[3] is the first extent's ee_block;
                        // debugfs restamps the inode checksum.
                        debugfs_w(img, &format!("sif {path} block[3] {logical}"));
                    }),
                ));
            }
        }
        v
    });
}

/// Damaged directory records: e2fsck salvages the record and goes on with
/// the ones after it, and judges an htree root's '.' and '..' as stored.
#[test]
fn damaged_directory_records_are_salvaged_and_the_rest_kept() {
    if !ready() {
        return;
    }
    let dir = TempDir::new("damage-dir");
    let bases: Vec<Base> = [EXT4_NOCSUM, EXT3, BIGALLOC, EXT4]
        .into_iter()
        .map(|c| base(&dir, c))
        .collect();
    judge_all(&dir, &bases, |_| {
        let mut v: Vec<Damage<'static>> = Vec::new();
        // (directory, which record of its first leaf block, field offset,
        // bytes): records 0 and 1 of block 0 are '.' and '..'.
        let cases: [(&str, usize, u64, &[u8]); 8] = [
            ("/d1", 0, 6, &[0x9b]),
            ("/d2", 1, 6, &[0x5d]),
            ("/d2", 1, 7, &[0x40]),
            ("/d1", 30, 6, &[0x98]),
            ("/d1", 60, 6, &[0xff]),
            ("/d1", 30, 4, &[0x0d, 0x01]),
            ("/d2", 70, 4, &[0x00, 0x00]),
            ("/d3", 40, 4, &[0x08, 0x00]),
        ];
        for (path, rec, field, bytes) in cases {
            v.push((
                format!("{path} record {rec}: bytes {field}.. = {bytes:02x?}"),
                Box::new(move |img: &Path| {
                    let bs = block_size(img);
                    let b0: u64 = debugfs_out(img, &format!("bmap {path} 0"))
                        .trim()
                        .parse()
                        .unwrap();
                    // Walk the records to the one wanted.
                    let blk = peek(img, b0 * bs, bs as usize);
                    let mut off = 0usize;
                    for _ in 0..rec {
                        let len = usize::from(u16::from_le_bytes([blk[off + 4], blk[off + 5]]));
                        if len < 12 || off + len >= blk.len() {
                            break;
                        }
                        off += len;
                    }
                    poke(img, b0 * bs + off as u64 + field, bytes);
                }),
            ));
        }
        v
    });
}

/// A directory's first block pointer damaged to name another file's
/// data block (damage campaign seed 263, case 106): e2fsck finds the
/// block claimed twice, gives one of the two a copy (pass 1D) and only
/// then salvages the directory's block in pass 2; the file keeps its
/// contents whichever inode gets the copy. A salvage made before the
/// copy rewrote the file's data as directory records.
#[test]
fn a_directory_block_shared_with_a_file_is_cloned_before_it_is_salvaged() {
    if !ready() {
        return;
    }
    let dir = TempDir::new("damage-dir-shared");
    let bases: Vec<Base> = [EXT2, EXT3, EXT4, EXT4_1K_INLINE]
        .into_iter()
        .map(|c| base(&dir, c))
        .collect();
    judge_all(&dir, &bases, |b| {
        let word = if uses_extents(b) { 5 } else { 0 };
        let mut v: Vec<Damage<'static>> = Vec::new();
        // Directories and files of both inode orders: the copy goes to
        // the lower-numbered inode.
        for (d, f) in [
            ("/d2", "/d1/f4"),
            ("/d3", "/large"),
            ("/big", "/d0/f1"),
            ("/d0/sub", "/frag"),
        ] {
            v.push((
                format!("{d}'s first block pointer names {f}'s first block"),
                Box::new(move |img: &Path| {
                    let target: u64 = debugfs_out(img, &format!("bmap {f} 0"))
                        .trim()
                        .parse()
                        .unwrap();
                    assert!(target > 0, "{f} has no block 0");
                    debugfs_w(img, &format!("sif {d} block[{word}] {target}"));
                }),
            ));
        }
        v
    });
}

/// An xattr block shared by several files with a bad entry (a hash of 0
/// or a wrong one, a value inode that is no EA inode, a value out of
/// bounds): e2fsck clears the block from every file naming it.
#[test]
fn bad_shared_xattr_blocks_are_cleared_from_every_sharer() {
    if !ready() {
        return;
    }
    let dir = TempDir::new("damage-xattr");
    let bases: Vec<Base> = [EXT4, EXT4_NOCSUM, EXT3, BIGALLOC]
        .into_iter()
        .map(|c| base(&dir, c))
        .collect();
    judge_all(&dir, &bases, |_| {
        let mut v: Vec<Damage<'static>> = Vec::new();
        // Field offsets in the first entry (after the 32-byte header).
        for (what, field, bytes) in [
            ("e_hash = 0", 12u64, vec![0u8; 4]),
            ("e_hash = 1", 12, vec![1, 0, 0, 0]),
            ("e_value_inum = 57", 4, 57u32.to_le_bytes().to_vec()),
            ("e_value_size = 4095", 8, 4095u32.to_le_bytes().to_vec()),
        ] {
            v.push((
                format!("shared xattr block: {what}"),
                Box::new(move |img: &Path| {
                    let stat = debugfs_out(img, "stat /d0/f0");
                    let blk: u64 = stat
                        .split("File ACL: ")
                        .nth(1)
                        .and_then(|r| r.split_whitespace().next())
                        .and_then(|x| x.parse().ok())
                        .unwrap();
                    poke(img, blk * block_size(img) + 32 + field, &bytes);
                }),
            ));
        }
        v
    });
}

/// One bit of the journal superblock flipped: e2fsck replays a log whose
/// s_start says it holds data, resets what it cannot use, and leaves
/// alone what it does not read (a flipped s_first still usable).
#[test]
fn journal_superblock_bit_flips_are_repaired_to_clean() {
    if !ready() {
        return;
    }
    let dir = TempDir::new("damage-journal");
    let bases: Vec<Base> = [EXT3, EXT4].into_iter().map(|c| base(&dir, c)).collect();
    judge_all(&dir, &bases, |_| {
        let mut v: Vec<Damage<'static>> = Vec::new();
        // (byte, bit) of the big-endian journal superblock: s_start,
        // s_first, s_maxlen, s_blocksize, s_sequence, blocktype, the
        // features, s_nr_users, s_uuid.
        for (byte, bit) in [
            (0x1e, 3),
            (0x1f, 0),
            (0x1c, 7),
            (0x17, 6),
            (0x14, 6),
            (0x13, 1),
            (0x10, 7),
            (0x0e, 2),
            (0x1b, 4),
            (0x07, 1),
            (0x27, 0),
            (0x43, 1),
            (0x40, 4),
            (0x35, 5),
        ] {
            v.push((
                format!("journal superblock byte {byte:#x} bit {bit}"),
                Box::new(move |img: &Path| {
                    let b0: u64 = debugfs_out(img, "bmap <8> 0").trim().parse().unwrap();
                    let at = b0 * block_size(img) + byte;
                    let old = peek(img, at, 1)[0];
                    poke(img, at, &[old ^ (1 << bit)]);
                }),
            ));
        }
        v
    });
}

/// A leaf extent's block pointer damaged (to another file's leaf, or to a
/// random block): e2fsck bounds what a leaf under an index may map by
/// i_size; our repair must not keep more of the file than e2fsck keeps
/// (a file grew to the size of the file whose leaf it took).
#[test]
fn damaged_leaf_pointers_keep_no_more_than_e2fsck() {
    if !ready() {
        return;
    }
    let dir = TempDir::new("damage-leaf");
    let bases: Vec<Base> = [EXT4_NOCSUM, EXT4, BIGALLOC]
        .into_iter()
        .map(|c| base(&dir, c))
        .collect();
    let size = |img: &Path, path: &str| -> Option<u64> {
        debugfs_out(img, &format!("stat {path}"))
            .split("Size: ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .and_then(|x| x.parse().ok())
    };
    let mut failed = Vec::new();
    let mut n = 0;
    for b in &bases {
        let mut cases: Vec<(String, &str, DamageFn)> = Vec::new();
        for (path, other) in [("/frag2", "/frag"), ("/frag", "/frag2")] {
            cases.push((
                format!("{path}'s index names {other}'s leaf"),
                path,
                Box::new(move |img: &Path| {
                    let leaf = extent_leaf(img, other);
                    let at = inode_at(img, inum(img, path)) + 0x28 + 12 + 4;
                    poke(img, at, &(leaf as u32).to_le_bytes());
                }),
            ));
        }
        for seed in 1..4u64 {
            cases.push((
                format!("a /frag leaf extent's start randomised (seed {seed})"),
                "/frag",
                Box::new(move |img: &Path| {
                    let bs = block_size(img);
                    let leaf = extent_leaf(img, "/frag");
                    let entries =
                        u16::from_le_bytes(peek(img, leaf * bs + 2, 2).try_into().unwrap());
                    let i = seed % u64::from(entries.max(1));
                    let blocks = sb_field(img, "Block count:");
                    let start = (seed * 2_654_435_761) % blocks;
                    poke(
                        img,
                        leaf * bs + 12 + 12 * i + 8,
                        &(start as u32).to_le_bytes(),
                    );
                }),
            ));
        }
        for (name, path, d) in cases {
            n += 1;
            failed.extend(judge(&dir, b, &name, &*d));
            let (ours, theirs) = (dir.path("ours.img"), dir.path("theirs.img"));
            let (so, st) = (size(&ours, path), size(&theirs, path));
            if let (Some(so), Some(st)) = (so, st) {
                if so > st {
                    failed.push(format!(
                        "{} / {name}: {path} is {so} bytes after our repair, {st} after e2fsck's",
                        b.cfg.name
                    ));
                }
            }
        }
    }
    println!("{}/{n} cases kept no more than e2fsck", n - failed.len());
    assert!(failed.is_empty(), "failed:\n{}", failed.join("\n"));
}

/// A base with quota files that agree with it: files given other owners
/// and a project, then `tune2fs -O quota,project` counts them (the kernel
/// here mounts no quota image, so the tree is written before quota is on).
fn quota_base(dir: &TempDir, cfg: Cfg) -> Base {
    let mut b = base(dir, cfg);
    for (path, uid, gid, prj) in [
        ("d0/f3", 1000, 100, 7),
        ("d1/f8", 1000, 100, 0),
        ("d2/f5", 1001, 0, 7),
        ("d3", 70000, 70000, 9),
        ("large", 1002, 1002, 0),
    ] {
        debugfs_w(&b.img, &format!("sif {path} uid {uid}"));
        debugfs_w(&b.img, &format!("sif {path} gid {gid}"));
        debugfs_w(&b.img, &format!("sif {path} projid {prj}"));
    }
    let o = run(Command::new("tune2fs")
        .args(["-O", "quota,project"])
        .arg(&b.img));
    assert!(o.status.success(), "tune2fs: {o:?}");
    b.files = manifest(dir, &b.img);
    b
}

/// Byte offset of 1 KiB quota block `qblk` of quota inode `ino`.
fn quota_block_at(img: &Path, ino: u64, qblk: u64) -> u64 {
    let bs = block_size(img);
    let lblk = qblk * 1024 / bs;
    let out = debugfs_out(img, &format!("bmap <{ino}> {lblk}"));
    let pblk: u64 = out.trim().parse().unwrap();
    pblk * bs + qblk * 1024 % bs
}

/// Our -n reports a damaged quota file (it was passed as clean).
fn quota_reported(img: &Path) {
    let o = run(ext4r().args(["fsck", "-fn"]).arg(img));
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.code() == Some(4) && text.contains("Update quota info for quota type"),
        "damage not reported by -n:\n{text}"
    );
}

/// Damaged quota files: e2fsck counts every owner's usage and rewrites a
/// quota file that disagrees or does not read, keeping its limits. A
/// clean one is left alone (no false alarm); a damaged one is reported
/// by -n and rewritten by -y so that e2fsck then finds it clean.
#[test]
fn damaged_quota_files_are_rewritten_with_the_usage_counted() {
    if !ready() || !have("tune2fs") {
        return;
    }
    let dir = TempDir::new("fsck-quota");
    let bases = [quota_base(&dir, EXT4), quota_base(&dir, EXT4_1K_INLINE)];
    for b in &bases {
        let (theirs, out) = e2fsck_fn(&b.img);
        assert_eq!(
            theirs, 0,
            "{}: base not clean for e2fsck:\n{out}",
            b.cfg.name
        );
        let o = run(ext4r().args(["fsck", "-fn"]).arg(&b.img));
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}: false alarm on a clean quota image:\n{}",
            b.cfg.name,
            String::from_utf8_lossy(&o.stdout)
        );
    }
    judge_all(&dir, &bases, |b| {
        let _ = b;
        let mut v: Vec<Damage<'static>> = Vec::new();
        for (qtype, ino) in [(0u64, 3u64), (1, 4)] {
            v.push((
                format!("quota type {qtype}: header version 7"),
                Box::new(move |img: &Path| {
                    poke(img, quota_block_at(img, ino, 0) + 4, &[7]);
                    quota_reported(img);
                }),
            ));
            v.push((
                format!("quota type {qtype}: first entry's space grows"),
                Box::new(move |img: &Path| {
                    // Block 5 is the first data block, its first entry id 0.
                    let at = quota_block_at(img, ino, 5) + 16 + 48;
                    let old = u64::from_le_bytes(peek(img, at, 8).try_into().unwrap());
                    poke(img, at, &(old + 4096).to_le_bytes());
                    quota_reported(img);
                }),
            ));
            v.push((
                format!("quota type {qtype}: data block scribbled"),
                Box::new(move |img: &Path| {
                    // Entries of many ids, each on its own tree path: the
                    // rewritten file needs more extents than i_block holds.
                    let junk: Vec<u8> = (0..600u32).map(|i| (i * 37 % 251 + 1) as u8).collect();
                    poke(img, quota_block_at(img, ino, 5) + 400, &junk);
                    quota_reported(img);
                }),
            ));
            v.push((
                format!("quota type {qtype}: tree root zeroed"),
                Box::new(move |img: &Path| {
                    poke(img, quota_block_at(img, ino, 1), &[0u8; 1024]);
                    quota_reported(img);
                }),
            ));
        }
        v.push((
            "project quota: a tree reference past the file".to_string(),
            Box::new(|img: &Path| {
                let ino = sb_field(img, "Project quota inode:");
                poke(img, quota_block_at(img, ino, 1), &[0xff, 0xff, 0, 0]);
                quota_reported(img);
            }),
        ));
        v
    });
}
