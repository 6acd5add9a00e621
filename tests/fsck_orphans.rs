//! Orphans still linked are truncations: `fsck.ext4r -fy` frees every
//! block past `i_size` as e2fsck's `release_orphan_inode` does (block maps
//! walked past the size, every extent past it, unwritten ones too, and the
//! tree or indirect blocks left empty). Each case makes a file with
//! debugfs (fragmented for an extent tree of one or two leaves, or with
//! blocks preallocated past its end), sets a smaller size, puts it on the
//! superblock's orphan list, and repairs one copy with ours and a twin
//! with e2fsck -fy; then ours must be clean under e2fsck -fn and our -fn,
//! the file must map exactly the blocks below its size, the same blocks
//! as e2fsck's twin, and we must free every block e2fsck frees — all of
//! them, except where e2fsck frees what is still in use (bigalloc, and a
//! directory's block it loses in the two-leaf case).

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

struct Case {
    name: &'static str,
    mkfs: &'static [&'static str],
    mib: u32,
    /// The size set on the orphan.
    size: u64,
    /// Small files written and every other one removed first, so that
    /// the big file fills the holes: this many (0: none).
    fragment: u32,
    /// Blocks preallocated (unwritten) past the file's end.
    fallocate: bool,
    /// e2fsck 1.47.0 frees blocks still in use here (see above): ours
    /// frees a subset of what it frees.
    e2fsck_overfrees: bool,
}

const CASES: &[Case] = &[
    Case {
        name: "ext4-1k-one-extent",
        mkfs: &["-t", "ext4"],
        mib: 64,
        size: 5000,
        fragment: 0,
        fallocate: false,
        e2fsck_overfrees: false,
    },
    Case {
        name: "ext4-1k-one-leaf-mid",
        mkfs: &["-t", "ext4"],
        mib: 64,
        size: 400_000,
        fragment: 60,
        fallocate: false,
        e2fsck_overfrees: false,
    },
    Case {
        name: "ext4-1k-one-leaf-to-root",
        mkfs: &["-t", "ext4"],
        mib: 64,
        size: 5000,
        fragment: 60,
        fallocate: false,
        e2fsck_overfrees: false,
    },
    Case {
        name: "ext4-1k-to-zero",
        mkfs: &["-t", "ext4"],
        mib: 64,
        size: 0,
        fragment: 60,
        fallocate: false,
        e2fsck_overfrees: false,
    },
    Case {
        name: "ext4-1k-two-leaves",
        mkfs: &["-t", "ext4"],
        mib: 64,
        size: 1_000_000,
        fragment: 400,
        fallocate: false,
        e2fsck_overfrees: true,
    },
    Case {
        name: "ext4-4k-unwritten-past-end",
        mkfs: &["-t", "ext4", "-b", "4096"],
        mib: 64,
        size: 3_000_000,
        fragment: 0,
        fallocate: true,
        e2fsck_overfrees: false,
    },
    Case {
        name: "ext4-1k-unwritten-cut",
        mkfs: &["-t", "ext4"],
        mib: 64,
        size: 1_500_000,
        fragment: 60,
        fallocate: true,
        e2fsck_overfrees: false,
    },
    Case {
        name: "ext3-1k-in-ind",
        mkfs: &["-t", "ext3"],
        mib: 64,
        size: 100_000,
        fragment: 0,
        fallocate: false,
        e2fsck_overfrees: false,
    },
    Case {
        name: "ext3-1k-in-dind",
        mkfs: &["-t", "ext3"],
        mib: 64,
        size: 600_000,
        fragment: 60,
        fallocate: false,
        e2fsck_overfrees: false,
    },
    Case {
        name: "ext2-1k-to-zero",
        mkfs: &["-t", "ext2"],
        mib: 64,
        size: 0,
        fragment: 0,
        fallocate: false,
        e2fsck_overfrees: false,
    },
    Case {
        name: "ext3-4k-direct",
        mkfs: &["-t", "ext3", "-b", "4096"],
        mib: 64,
        size: 50_000,
        fragment: 60,
        fallocate: false,
        e2fsck_overfrees: false,
    },
    Case {
        name: "bigalloc-4k",
        mkfs: &["-t", "ext4", "-O", "bigalloc", "-b", "4096"],
        mib: 128,
        size: 70_000,
        fragment: 60,
        fallocate: false,
        e2fsck_overfrees: true,
    },
];

fn debugfs(img: &Path, w: bool, script: &str) -> String {
    let dir = img.parent().unwrap();
    let cmds = dir.join("cmds");
    std::fs::write(&cmds, script).unwrap();
    let mut c = Command::new("debugfs");
    if w {
        c.arg("-w");
    }
    let o = run(c.arg("-f").arg(&cmds).arg(img));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stat(img: &Path) -> String {
    debugfs(img, false, "stat f\n")
}

/// The data blocks of `f` and its mapping blocks (extent tree or
/// indirect blocks), from debugfs's `stat` list ("(0-4):4385-4389",
/// "(5[u]):4400", "(ETB0):4410", "(IND):1234").
fn blocks(img: &Path) -> (BTreeSet<u64>, BTreeSet<u64>) {
    let st = stat(img);
    let (mut data, mut meta) = (BTreeSet::new(), BTreeSet::new());
    let Some(at) = st.find("BLOCKS:").or_else(|| st.find("EXTENTS:")) else {
        return (data, meta);
    };
    let list = st[at..].split_once(':').map_or("", |x| x.1);
    for item in list.split([',', '\n']).map(str::trim) {
        let Some((label, phys)) = item.strip_prefix('(').and_then(|x| x.split_once("):")) else {
            continue;
        };
        let (a, b) = phys.split_once('-').unwrap_or((phys, phys));
        let (Ok(a), Ok(b)) = (a.trim().parse::<u64>(), b.trim().parse::<u64>()) else {
            continue;
        };
        if label.starts_with(|ch: char| ch.is_ascii_digit()) {
            data.extend(a..=b);
        } else {
            meta.extend(a..=b);
        }
    }
    (data, meta)
}

fn data_blocks(img: &Path) -> BTreeSet<u64> {
    blocks(img).0
}

/// Every block dumpe2fs lists as free.
fn free_blocks(img: &Path) -> BTreeSet<u64> {
    let o = run(Command::new("dumpe2fs").arg(img));
    let text = String::from_utf8_lossy(&o.stdout);
    let mut out = BTreeSet::new();
    for l in text.lines() {
        let Some(list) = l.trim().strip_prefix("Free blocks: ") else {
            continue;
        };
        for part in list.split(", ").map(str::trim).filter(|p| !p.is_empty()) {
            let (a, b) = part.split_once('-').unwrap_or((part, part));
            let (a, b): (u64, u64) = (a.parse().unwrap(), b.parse().unwrap());
            out.extend(a..=b);
        }
    }
    out
}

fn block_size(img: &Path) -> u64 {
    let o = run(Command::new("dumpe2fs").arg("-h").arg(img));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("Block size:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap()
}

fn ours(img: &Path, flags: &str) -> (i32, String) {
    let o = run(Command::new(env!("CARGO_BIN_EXE_ext4r"))
        .args(["fsck", flags])
        .arg(img));
    let text =
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    (o.status.code().unwrap_or(-1), text)
}

/// Builds the case's image: the file `f` of 3,000,000 bytes, cut to the
/// case's size and put on the orphan list. Returns its inode.
fn build(c: &Case, img: &Path, dir: &TempDir) -> u64 {
    make_image(Command::new("mke2fs"), c.mkfs, img, &format!("{}M", c.mib)).unwrap();
    // Bytes that differ block to block (deterministic).
    let big: Vec<u8> = (0..3_000_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(dir.path("big"), &big).unwrap();
    std::fs::write(dir.path("small"), &big[..3000]).unwrap();
    let mut script = String::new();
    let small = dir.path("small");
    for i in 1..=c.fragment {
        script += &format!("write {} s{i}\n", small.display());
    }
    for i in (1..=c.fragment).step_by(2) {
        script += &format!("rm s{i}\n");
    }
    script += &format!("write {} f\n", dir.path("big").display());
    debugfs(img, true, &script);
    let bs = block_size(img);
    if c.fallocate {
        let n = 3_000_000 / bs;
        debugfs(img, true, &format!("fallocate f {} {}\n", n + 10, n + 400));
        assert!(
            stat(img).contains("[u]"),
            "no unwritten extent: {}",
            stat(img)
        );
    }
    let st = stat(img);
    let ino: u64 = st
        .split("Inode: ")
        .nth(1)
        .and_then(|w| w.split_whitespace().next())
        .and_then(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("no inode for f: {st}"));
    if c.fragment >= 400 {
        // Two leaves at least: the index root names several.
        let ex = debugfs(img, false, "ex f\n");
        assert!(
            ex.lines()
                .filter(|l| l.trim_start().starts_with("0/ 1"))
                .count()
                >= 2,
            "{ex}"
        );
    }
    debugfs(
        img,
        true,
        &format!(
            "sif f size {}\nsif f dtime 0\nssv last_orphan {ino}\n",
            c.size
        ),
    );
    ino
}

#[test]
fn truncating_orphans_free_what_e2fsck_frees() {
    if !have("mke2fs") || !have("debugfs") || !have("e2fsck") || !have("dumpe2fs") {
        eprintln!("SKIP: needs mke2fs, debugfs, dumpe2fs and e2fsck");
        return;
    }
    let mut failures = Vec::new();
    for c in CASES {
        let dir = TempDir::new(&format!("orphan-{}", c.name));
        let img = dir.path("ours.img");
        let ino = build(c, &img, &dir);
        let twin = dir.path("twin.img");
        copy_sparse(&img, &twin).unwrap();
        let before = data_blocks(&img);
        let free_before = free_blocks(&img);

        let (rc, out) = ours(&img, "-fy");
        let e = run(Command::new("e2fsck").arg("-fy").arg(&twin));
        let mut why = Vec::new();
        if rc != 0 {
            why.push(format!("ours -fy exit {rc}:\n{out}"));
        }
        if !out.contains(&format!("Truncating orphaned inode {ino} ")) {
            why.push(format!("no truncation said:\n{out}"));
        }
        let (erc, eout) = e2fsck_fn(&img);
        if erc != 0 {
            why.push(format!("e2fsck -fn after ours exit {erc}:\n{eout}"));
        }
        let (arc, aout) = ours(&img, "-fn");
        if arc != 0 {
            why.push(format!("ours -fn again exit {arc}:\n{aout}"));
        }
        let bs = block_size(&img);
        let kept = data_blocks(&img);
        let want = c.size.div_ceil(bs) as usize;
        if kept.len() != want || !kept.iter().all(|b| before.contains(b)) {
            why.push(format!(
                "{} data blocks kept, want the first {want} of the {}",
                kept.len(),
                before.len()
            ));
        }
        let theirs = data_blocks(&twin);
        if !theirs.is_subset(&kept) || !c.e2fsck_overfrees && theirs != kept {
            why.push(format!(
                "data blocks differ from e2fsck's: ours {}, theirs {}",
                kept.len(),
                theirs.len()
            ));
        }
        let (ours_free, their_free) = (free_blocks(&img), free_blocks(&twin));
        let freed = ours_free.difference(&free_before).count();
        // Where e2fsck's repair goes wrong, its result may keep a tree
        // block ours no longer needs; nothing else of what it keeps may
        // be free in ours.
        let their_meta = blocks(&twin).1;
        let unexplained = ours_free
            .difference(&their_free)
            .any(|b| !c.e2fsck_overfrees || !their_meta.contains(b));
        if unexplained || !c.e2fsck_overfrees && ours_free != their_free {
            why.push(format!(
                "free blocks: ours {} (freed {freed}), e2fsck's {} (exit {:?}); ours not theirs: \
                 {:?}",
                ours_free.len(),
                their_free.len(),
                e.status.code(),
                ours_free
                    .difference(&their_free)
                    .take(10)
                    .collect::<Vec<_>>()
            ));
        }
        if freed == 0 && c.size.div_ceil(bs) < 3_000_000 / bs {
            why.push("nothing was freed".into());
        }
        eprintln!(
            "{:<28} kept {:>5} data blocks, freed {:>5} blocks{}",
            c.name,
            kept.len(),
            freed,
            if why.is_empty() { "" } else { "  FAILED" }
        );
        if !why.is_empty() {
            failures.push(format!("{}: {}", c.name, why.join("\n")));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
