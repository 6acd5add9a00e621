//! e2fsck problem codes met on images damaged the way each one arises:
//! for every case e2fsck and fsck.ext4r give the same verdict on the
//! damaged image (read-only, or in a repair for what e2fsck only meets
//! while repairing), say e2fsck's words, and after our -fy both e2fsck
//! -fn and our second -fn find the filesystem clean (exit 0).
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::process::Command;

use common::{copy_sparse, have, is_root, make_image, run, TempDir};

fn ext4r() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ext4r"))
}

/// Runs debugfs requests one at a time (it takes one -R).
fn debugfs(img: &Path, cmds: &[String]) {
    for x in cmds {
        let o = run(Command::new("debugfs").args(["-w", "-R", x]).arg(img));
        assert!(o.status.success(), "debugfs {x}");
    }
}

fn debugfs_out(img: &Path, cmd: &str) -> String {
    let o = run(Command::new("debugfs").args(["-R", cmd]).arg(img));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Exit code and stdout.
fn tool(cmd: &mut Command) -> (i32, String) {
    let o = run(cmd);
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
    )
}

/// One case: how to damage the image, whether e2fsck meets it only in a
/// repair, the words both must print in that run.
struct Case {
    name: &'static str,
    mkfs: &'static [&'static str],
    size: &'static str,
    damage: fn(&Path, &Path),
    repair_only: bool,
    says: &'static [&'static str],
}

fn check(dir: &TempDir, case: &Case) -> Result<(), String> {
    let base = dir.path(&format!("{}.img", case.name.replace(' ', "_")));
    make_image(Command::new("mke2fs"), case.mkfs, &base, case.size)?;
    (case.damage)(&base, &dir.0);
    let copy = |tag: &str| {
        let p = dir.path(&format!("{tag}.img"));
        copy_sparse(&base, &p).unwrap();
        p
    };
    let flag = if case.repair_only { "-fy" } else { "-fn" };
    let theirs = tool(Command::new("e2fsck").arg(flag).arg(copy("theirs")));
    let ours_img = copy("ours");
    let ours = tool(ext4r().args(["fsck", flag]).arg(&ours_img));
    let mut why = Vec::new();
    if theirs.0 != ours.0 {
        why.push(format!("exit {} (e2fsck {})", ours.0, theirs.0));
    }
    for w in case.says {
        if !theirs.1.contains(w) {
            why.push(format!("e2fsck does not say {w:?}"));
        }
        if !ours.1.contains(w) {
            why.push(format!("we do not say {w:?}"));
        }
    }
    let img = copy("repaired");
    let (rc, out) = tool(ext4r().args(["fsck", "-fy"]).arg(&img));
    if rc > 1 {
        why.push(format!("our -fy exit {rc}"));
    }
    let after = tool(Command::new("e2fsck").arg("-fn").arg(&img));
    if after.0 != 0 {
        why.push(format!(
            "e2fsck -fn after our -fy: {}\n{}",
            after.0, after.1
        ));
    }
    let again = tool(ext4r().args(["fsck", "-fn"]).arg(&img));
    if again.0 != 0 {
        why.push(format!("our -fn after our -fy: {}\n{}", again.0, again.1));
    }
    if why.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{}\n--- e2fsck {flag}:\n{}\n--- ours {flag}:\n{}\n--- our -fy:\n{out}",
            why.join("\n"),
            theirs.1,
            ours.1
        ))
    }
}

/// The first block of group 0's inode table.
fn first_itable_block(img: &Path) -> u64 {
    let o = run(Command::new("dumpe2fs").arg(img));
    String::from_utf8_lossy(&o.stdout)
        .split("Inode table at ")
        .nth(1)
        .and_then(|r| r.split('-').next())
        .and_then(|n| n.trim().parse().ok())
        .expect("inode table")
}

fn inum(img: &Path, path: &str) -> u32 {
    debugfs_out(img, &format!("stat {path}"))
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .expect("inode number")
}

/// A deleted file left on the orphan list, its data blocks as `edit`
/// leaves them.
fn orphan(img: &Path, dir: &Path, edit: fn(&Path, u32, u64) -> Vec<String>) {
    let data = dir.join("data");
    std::fs::write(&data, vec![0x5a; 20_000]).unwrap();
    debugfs(img, &[format!("write {} victim", data.display())]);
    let n = inum(img, "/victim");
    let b: u64 = debugfs_out(img, "bmap /victim 0").trim().parse().unwrap();
    let mut cmds = vec![
        "unlink /victim".to_string(),
        format!("sif <{n}> links_count 0"),
        format!("ssv last_orphan {n}"),
    ];
    cmds.extend(edit(img, n, b));
    debugfs(img, &cmds);
}

/// Makes `img` (16 MiB, mke2fs `args`) with /big, a directory of 400 long
/// names indexed by `e2fsck -fD`.
fn indexed_dir_image(img: &Path, dir: &Path, args: &[&str]) {
    let src = dir.join("indexed-dir-src/big");
    std::fs::create_dir_all(&src).unwrap();
    for k in 0..400 {
        std::fs::write(src.join(format!("file_with_a_long_name_{k}")), "x").unwrap();
    }
    let o = run(Command::new("mke2fs")
        .env("MKE2FS_SKIP_CHECK_MSG", "1")
        .args(["-q", "-F"])
        .args(args)
        .arg("-d")
        .arg(src.parent().unwrap())
        .arg(img)
        .arg("16M"));
    assert!(o.status.success());
    let o = run(Command::new("e2fsck").arg("-fyD").arg(img));
    assert!(o.status.code().is_some_and(|c| c <= 1));
}

/// Shortens the '..' record of a new directory `d` (1 KiB blocks, no
/// tail) so that `left` bytes follow it in its block: those bytes, not the
/// record, are the damage (e2fsck salvages at their offset and '..' takes
/// them back).
fn short_dotdot(img: &Path, left: u16) {
    debugfs(img, &["mkdir d".to_string()]);
    let blk: u64 = debugfs_out(img, "bmap d 0").trim().parse().unwrap();
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().write(true).open(img).unwrap();
    f.write_all_at(&(1012 - left).to_le_bytes(), blk * 1024 + 16)
        .unwrap();
}

const CASES: &[Case] = &[
    Case {
        name: "orphan with an illegal block",
        mkfs: &["-t", "ext4"],
        size: "16M",
        // The first extent's start (i_block word 5) past the end.
        damage: |i, d| orphan(i, d, |_, n, _| vec![format!("sif <{n}> block[5] 99999999")]),
        repair_only: true,
        says: &["Illegal block #0 (99999999) found in orphaned inode 12."],
    },
    Case {
        name: "orphan with cleared blocks",
        mkfs: &["-t", "ext4"],
        size: "16M",
        damage: |i, d| orphan(i, d, |_, _, b| vec![format!("freeb {b} 20")]),
        repair_only: true,
        says: &["Already cleared block #0 ("],
    },
    Case {
        name: "block map on bigalloc",
        mkfs: &["-t", "ext4", "-O", "bigalloc", "-C", "16384", "-b", "1024"],
        size: "32M",
        damage: |i, d| {
            let data = d.join("data");
            std::fs::write(&data, vec![0x33; 10_000]).unwrap();
            debugfs(i, &[format!("write {} bm", data.display())]);
            let b: u64 = debugfs_out(i, "bmap /bm 0").trim().parse().unwrap();
            let mut cmds = vec!["sif /bm flags 0".to_string()];
            for k in 0..15u64 {
                let v = if k < 10 { b + k } else { 0 };
                cmds.push(format!("sif /bm block[{k}] {v}"));
            }
            debugfs(i, &cmds);
        },
        repair_only: false,
        says: &["Inode 12 on bigalloc filesystem cannot be block mapped."],
    },
    // A journal left visible as /.journal (tune2fs -j on a mounted ext3)
    // moves to the reserved inode in a repair.
    Case {
        name: "visible journal",
        mkfs: &["-t", "ext4"],
        size: "32M",
        damage: |i, _| {
            debugfs(
                i,
                &[
                    "write /dev/null .journal".to_string(),
                    "copy_inode <8> <12>".to_string(),
                    "ssv journal_inum 12".to_string(),
                    "clri <8>".to_string(),
                ],
            )
        },
        repair_only: true,
        says: &["Moving journal from /.journal to hidden inode."],
    },
    // Strict encoding: a casefolded directory's names must be UTF-8.
    Case {
        name: "name not UTF-8 in a casefolded directory",
        mkfs: &[
            "-t",
            "ext4",
            "-O",
            "casefold",
            "-E",
            "encoding=utf8,encoding_flags=strict",
        ],
        size: "16M",
        damage: |i, _| {
            use std::os::unix::ffi::OsStrExt;
            debugfs(
                i,
                &["mkdir d".to_string(), "sif d flags 0x40080000".to_string()],
            );
            let req = std::ffi::OsStr::from_bytes(b"write /dev/null d/ab\xffcd");
            let o = run(Command::new("debugfs").arg("-w").arg("-R").arg(req).arg(i));
            assert!(o.status.success());
        },
        repair_only: false,
        says: &["has illegal UTF-8 characters in its name.\nFix? no"],
    },
    // The bad block inode's indirect block on an inode table (mke2fs -l
    // lists 20 blocks: 12 direct, 8 under an indirect block). A read-only
    // check stops there (e2fsck exits 12, we 8), so the repair is compared.
    Case {
        name: "bad block list's indirect block on metadata",
        mkfs: &["-t", "ext4", "-b", "1024", "-l", "/dev/shm/ext4r-bb-list"],
        size: "16M",
        damage: |i, _| debugfs(i, &["sif <1> block[IND] 200".to_string()]),
        repair_only: true,
        says: &[
            "Bad block inode has an indirect block (200) that conflicts with\nfilesystem metadata.",
        ],
    },
    // A listed bad block that is also the list's indirect block: the
    // indirect block, met second, is cut off.
    Case {
        name: "bad block listed as the list's indirect block",
        mkfs: &["-t", "ext4", "-b", "1024", "-l", "/dev/shm/ext4r-bb-list"],
        size: "16M",
        damage: |i, _| {
            let ind = debugfs_out(i, "stat <1>")
                .split("(IND):")
                .nth(1)
                .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
                .map(str::to_string)
                .expect("indirect block");
            debugfs(i, &[format!("sif <1> block[3] {ind}")]);
        },
        repair_only: true,
        says: &["used as bad block inode indirect block."],
    },
    // The list names the inode table block holding inode 1 itself. A
    // read-only e2fsck goes on and aborts at the root inode there (12);
    // we go on without the list (4): the repair is compared.
    Case {
        name: "bad block list names its own inode's block",
        mkfs: &["-t", "ext4", "-b", "1024", "-l", "/dev/shm/ext4r-bb-list"],
        size: "16M",
        damage: |i, _| {
            let it = first_itable_block(i);
            debugfs(i, &[format!("sif <1> block[0] {it}")]);
        },
        repair_only: true,
        says: &["Bad block list says the bad block list inode is bad.  Clear inode? yes"],
    },
    Case {
        name: "orphan file size",
        mkfs: &["-t", "ext4", "-O", "orphan_file", "-b", "1024"],
        size: "64M",
        damage: |i, _| debugfs(i, &["sif <12> size 32668".to_string()]),
        repair_only: false,
        says: &[
            "Orphan file (inode 12) size is not multiple of block size.",
            "Failed to initialize orphan file.\nRecreate? no",
        ],
    },
    // libext2fs meets holes in block maps only.
    Case {
        name: "orphan file hole",
        mkfs: &[
            "-t",
            "ext4",
            "-O",
            "orphan_file,^extent,^64bit",
            "-b",
            "1024",
        ],
        size: "64M",
        damage: |i, _| debugfs(i, &["sif <12> block[5] 0".to_string()]),
        repair_only: false,
        says: &[
            "Orphan file (inode 12) contains hole at block 5.",
            "Failed to initialize orphan file.\nRecreate? no",
        ],
    },
    // An indexed directory whose i_size says 4 GiB: e2fsck's handle_htree
    // counts it a large directory (before the size is put right) and sets
    // the large_dir feature.
    Case {
        name: "indexed directory of 4 GiB",
        mkfs: &["-t", "ext4"],
        size: "16M",
        damage: |i, d| {
            indexed_dir_image(i, d, &["-t", "ext4"]);
            assert!(debugfs_out(i, "stat /big").contains("Flags: 0x81000"));
            // The size made 4 GiB + 18 KiB.
            debugfs(i, &["sif /big size 0x100004800".to_string()]);
        },
        repair_only: false,
        says: &[
            "Filesystem has large directories, but lacks LARGE_DIR flag in superblock.\nFix? no",
        ],
    },
    // An htree root whose index count is 0 (damage seed 1, cases 45 and
    // 110): e2fsck walks the empty index and finds every leaf
    // unreferenced; the format's parser refuses such a root, and pass 2
    // used to read the directory as if it had no index, finding nothing.
    Case {
        name: "htree root with no index entries",
        mkfs: &["-t", "ext3"],
        size: "16M",
        damage: |i, d| {
            indexed_dir_image(i, d, &["-t", "ext3", "-b", "1024"]);
            let blk: u64 = debugfs_out(i, "bmap /big 0").trim().parse().unwrap();
            use std::os::unix::fs::FileExt;
            let f = std::fs::OpenOptions::new().write(true).open(i).unwrap();
            f.write_all_at(&[0, 0], blk * 1024 + 34).unwrap();
        },
        repair_only: false,
        says: &[
            "Problem in HTREE directory inode 12: block #1 has bad max hash\n\
             Problem in HTREE directory inode 12: block #1 not referenced\n",
            "Invalid HTREE directory inode 12 (/big).  Clear HTree index? no",
        ],
    },
    // An orphan block whose tail lost its magic (damage seed 1 case 100):
    // e2fsck compares each block with an empty one, tail included; we
    // counted the slots only and found it clean.
    Case {
        name: "orphan block with a bad magic",
        mkfs: &["-t", "ext4", "-O", "orphan_file", "-b", "1024"],
        size: "64M",
        damage: |i, _| {
            let blk: u64 = debugfs_out(i, "bmap <12> 3").trim().parse().unwrap();
            use std::os::unix::fs::FileExt;
            let f = std::fs::OpenOptions::new().write(true).open(i).unwrap();
            f.write_all_at(&[1, 2, 3, 4], blk * 1024 + 1024 - 8)
                .unwrap();
        },
        repair_only: false,
        says: &["Orphan file (inode 12) block 3 is not clean.\nClear? no"],
    },
    // A byte of a descriptor's reserved tail changed (damage seed 1 case
    // 52): only its checksum notices. The checksum alone is harmless, but
    // libext2fs then reads the group's bitmaps from disk whatever its
    // uninit flags say, and an uninitialised group's on-disk inode bitmap
    // is not what pass 5 computes (exit 4); we kept the flags and said
    // clean.
    Case {
        name: "group descriptor checksum only",
        mkfs: &["-t", "ext4", "-b", "1024"],
        size: "16M",
        damage: |i, _| {
            use std::os::unix::fs::FileExt;
            let f = std::fs::OpenOptions::new().write(true).open(i).unwrap();
            // Descriptor table at block 2; group 1's, byte 63.
            f.write_all_at(&[0x5a], 2 * 1024 + 64 + 63).unwrap();
        },
        repair_only: false,
        says: &["One or more block group descriptor checksums are invalid."],
    },
    Case {
        name: "orphan file hole in an extent tree",
        mkfs: &["-t", "ext4", "-O", "orphan_file", "-b", "1024"],
        size: "64M",
        damage: |i, _| debugfs(i, &["punch <12> 5 5".to_string()]),
        repair_only: false,
        says: &[],
    },
    // An inline directory whose system.data value (4 bytes) cannot hold
    // a record: e2fsck drops it. A read-only e2fsck then stops at the
    // value's records (exit 12) where we go on: the repair is compared.
    Case {
        name: "inline directory size",
        mkfs: &["-t", "ext4", "-O", "inline_data"],
        size: "16M",
        damage: |i, _| {
            debugfs(
                i,
                &[
                    "mkdir d".to_string(),
                    "ea_set d system.data abcd".to_string(),
                    "sif d size 64".to_string(),
                ],
            )
        },
        repair_only: true,
        says: &["Inline directory inode 12 size (64) must be a multiple of 4.\nFix? yes"],
    },
    // A user quota file left visible as /aquota.user (as quota tools
    // made them before the feature kept them in inodes 3 and 4): a repair
    // moves it to inode 3; a read-only e2fsck does not look.
    Case {
        name: "visible quota file",
        mkfs: &["-t", "ext4", "-O", "quota"],
        size: "32M",
        damage: |i, _| {
            debugfs(
                i,
                &[
                    "write /dev/null aquota.user".to_string(),
                    "copy_inode <3> <12>".to_string(),
                    "ssv usr_quota_inum 12".to_string(),
                    "clri <3>".to_string(),
                ],
            )
        },
        repair_only: true,
        says: &["Hiding user quota inode 12 (/aquota.user).\nPass 1"],
    },
    // An unknown incompat bit in a primary superblock whose checksum then
    // fails: libext2fs checks the checksum first, so e2fsck goes to a
    // backup (whose features are sound) instead of refusing.
    Case {
        name: "unknown feature in a primary with a bad checksum",
        mkfs: &["-t", "ext4"],
        size: "16M",
        damage: |i, _| {
            use std::os::unix::fs::FileExt;
            let f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(i)
                .unwrap();
            let mut w = [0u8; 4];
            f.read_exact_at(&mut w, 1024 + 0x60).unwrap();
            let v = u32::from_le_bytes(w) | 0x4_0000;
            f.write_all_at(&v.to_le_bytes(), 1024 + 0x60).unwrap();
        },
        repair_only: false,
        says: &["trying backup blocks"],
    },
    Case {
        name: "dotdot leaves 4 bytes",
        mkfs: &["-t", "ext3", "-b", "1024"],
        size: "8M",
        damage: |i, _| short_dotdot(i, 4),
        repair_only: true,
        says: &["Directory inode 12, block #0, offset 1020: directory corrupted\nSalvage? yes"],
    },
    Case {
        name: "dotdot leaves 8 bytes",
        mkfs: &["-t", "ext3", "-b", "1024"],
        size: "8M",
        damage: |i, _| short_dotdot(i, 8),
        repair_only: true,
        says: &["Directory inode 12, block #0, offset 1016: directory corrupted\nSalvage? yes"],
    },
    // An indexed block-mapped directory with an illegal pointer past its
    // last block: the repair clears it, and e2fsck then gives the
    // directory a block there, which its index does not cover. Only a
    // repair meets it (a read-only check leaves the pointer be).
    Case {
        name: "block past an htree directory's index",
        mkfs: &["-t", "ext3", "-b", "4096"],
        size: "16M",
        damage: |i, d| {
            indexed_dir_image(i, d, &["-t", "ext3", "-b", "4096"]);
            assert_eq!(debugfs_out(i, "bmap /big 6").trim(), "0");
            debugfs(i, &["sif /big block[6] 99999999".to_string()]);
        },
        repair_only: true,
        says: &[
            "Directory inode 12 has an unallocated block #6.  Allocate? yes",
            "Unexpected block in HTREE directory inode 12 (/big).\nClear HTree index? yes",
        ],
    },
    // A reserved GDT block's list of copies naming a wrong block: e2fsck
    // asks to recreate the resize inode before its pass 1; -n leaves it
    // (exit 0), and its pass 1 still counts the double-indirect block in
    // use, so the bitmaps agree.
    Case {
        name: "resize inode copy list",
        mkfs: &["-t", "ext4", "-b", "4096"],
        size: "512M",
        damage: |i, _| {
            use std::os::unix::fs::FileExt;
            let stat = debugfs_out(i, "stat <7>");
            let ind: u64 = stat
                .split("(IND):")
                .nth(1)
                .and_then(|r| r.split(',').next())
                .and_then(|n| n.trim().parse().ok())
                .expect("a reserved GDT block");
            let f = std::fs::OpenOptions::new().write(true).open(i).unwrap();
            f.write_all_at(&25u32.to_le_bytes(), ind * 4096 + 4).unwrap();
        },
        repair_only: false,
        says: &["Resize inode not valid.  Recreate? no"],
    },
    // Without uninit_bg or metadata_csum nothing obeys a descriptor's
    // INODE_UNINIT flag or unused count (the whole table is read), but an
    // entry naming an inode they cover is still held against them; -n
    // leaves them, so each such entry is an error (exit 4).
    Case {
        name: "INODE_UNINIT without the feature",
        mkfs: &["-t", "ext2", "-b", "1024"],
        size: "16M",
        damage: |i, _| debugfs(i, &["set_bg 0 flags 7".to_string()]),
        repair_only: false,
        says: &[
            "Group descriptor 0 marked uninitialized without feature set.",
            "Entry '..' in / (2) references inode 2 in group 0 where _INODE_UNINIT is set.",
        ],
    },
    Case {
        name: "unused inode count without the feature",
        mkfs: &["-t", "ext3", "-b", "1024", "-O", "^uninit_bg"],
        size: "16M",
        damage: |i, _| {
            let ipg: u32 = debugfs_out(i, "stats")
                .lines()
                .find_map(|l| l.strip_prefix("Inodes per group:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap();
            // lost+found (inode 11) in the tail; the root not.
            debugfs(i, &[format!("set_bg 0 itable_unused {}", ipg - 8)]);
        },
        repair_only: false,
        says: &["Entry 'lost+found' in / (2) references inode 11 found in group 0's unused inodes area."],
    },
];

#[test]
fn e2fsck_codes_are_met_as_e2fsck_meets_them() {
    if !have("debugfs") || !have("e2fsck") || !have("mke2fs") {
        eprintln!("SKIP: needs debugfs, e2fsck and mke2fs");
        return;
    }
    let dir = TempDir::new("problem-codes");
    // mke2fs -l's list for the bad block cases: 20 blocks.
    let list: String = (3000..3020).map(|b| format!("{b}\n")).collect();
    std::fs::write("/dev/shm/ext4r-bb-list", list).unwrap();
    let mut failed = Vec::new();
    for case in CASES {
        match check(&dir, case) {
            Ok(()) => println!("ok: {}", case.name),
            Err(e) => {
                println!("FAILED: {}\n{e}", case.name);
                failed.push(case.name);
            }
        }
    }
    let _ = std::fs::remove_file("/dev/shm/ext4r-bb-list");
    assert!(failed.is_empty(), "failed: {failed:?}");
}

/// A full filesystem without lost+found: e2fsck gives up making one and
/// says so; nothing is changed (exit 0).
#[test]
fn lost_found_on_a_full_filesystem() {
    if !is_root() || !have("losetup") || !have("debugfs") || !have("e2fsck") {
        eprintln!("SKIP: needs root, losetup, debugfs and e2fsck");
        return;
    }
    let dir = TempDir::new("lpf-full");
    let img = dir.path("full.img");
    make_image(
        Command::new("mke2fs"),
        &["-t", "ext4", "-m", "0", "-N", "64"],
        &img,
        "8M",
    )
    .unwrap();
    let mnt = dir.path("mnt");
    let mut lm = common::LoopMount::new(&img, &mnt).unwrap();
    std::fs::remove_dir(mnt.join("lost+found")).unwrap();
    // Fill what the kernel gives, then the blocks it keeps back.
    let _ = run(Command::new("dd")
        .args(["if=/dev/zero", "bs=1k"])
        .arg(format!("of={}", mnt.join("fill").display())));
    lm.umount().unwrap();
    drop(lm);
    debugfs(&img, &["write /dev/null rest".to_string()]);
    let free: u64 = debugfs_out(&img, "stats")
        .lines()
        .find_map(|l| l.trim().strip_prefix("Free blocks:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("free blocks");
    // Tree blocks may be needed too: a little less than all, then the
    // rest one by one until nothing is left.
    let _ = run(Command::new("debugfs")
        .args([
            "-w",
            "-R",
            &format!("fallocate /rest 0 {}", free.saturating_sub(4)),
        ])
        .arg(&img));
    for at in free..free + 8 {
        let _ = run(Command::new("debugfs")
            .args(["-w", "-R", &format!("fallocate /rest {at} {at}")])
            .arg(&img));
    }
    let says = [
        "/lost+found not found.  Create? yes",
        "Cannot allocate space for /lost+found.\nPlace lost files in root directory instead? yes",
        "Insufficient space to recover lost files!",
    ];
    let theirs = tool(Command::new("e2fsck").arg("-fy").arg(&{
        let p = dir.path("theirs.img");
        copy_sparse(&img, &p).unwrap();
        p
    }));
    let ours = tool(ext4r().args(["fsck", "-fy"]).arg(&img));
    for w in says {
        assert!(theirs.1.contains(w), "e2fsck: {w:?} not in\n{}", theirs.1);
        assert!(ours.1.contains(w), "ours: {w:?} not in\n{}", ours.1);
    }
    assert_eq!((ours.0, theirs.0), (0, 0), "{}", ours.1);
    assert_eq!(tool(Command::new("e2fsck").arg("-fn").arg(&img)).0, 0);
    assert_eq!(tool(ext4r().args(["fsck", "-fn"]).arg(&img)).0, 0);
}

/// A device shorter than the superblock says (PR_0_FS_SIZE_WRONG): -n
/// says so and goes on (exit 0, as e2fsck -n), the JSON report lists it,
/// -y aborts before writing (exit 8).
#[test]
fn filesystem_larger_than_its_device() {
    if !have("e2fsck") || !have("mke2fs") {
        eprintln!("SKIP: needs e2fsck and mke2fs");
        return;
    }
    let dir = TempDir::new("fs-size");
    let img = dir.path("short.img");
    make_image(Command::new("mke2fs"), &["-t", "ext4"], &img, "16M").unwrap();
    let f = std::fs::OpenOptions::new().write(true).open(&img).unwrap();
    f.set_len(15 << 20).unwrap();
    let words = "Either the superblock or the partition table is likely to be corrupt!";
    for flag in ["-fn", "-fy"] {
        let theirs = tool(Command::new("e2fsck").arg(flag).arg(&img));
        let ours = tool(ext4r().args(["fsck", flag]).arg(&img));
        assert_eq!(ours.0, theirs.0, "{flag}: {}", ours.1);
        assert!(
            theirs.1.contains(words) && ours.1.contains(words),
            "{}",
            ours.1
        );
    }
    let json = tool(ext4r().args(["fsck", "-fn", "--json"]).arg(&img));
    assert!(
        json.1.contains("\"code\":\"PR_0_FS_SIZE_WRONG\""),
        "{}",
        json.1
    );
    assert_eq!(json.0, 0);
}

/// A filesystem with its journal on a device of its own: (journal device
/// image made with `jfeatures`, filesystem image).
fn with_external_journal(
    dir: &TempDir,
    jfeatures: &str,
) -> (std::path::PathBuf, std::path::PathBuf) {
    let (jdev, img) = (dir.path("journal.img"), dir.path("fs.img"));
    let o = run(Command::new("mke2fs")
        .args(["-q", "-F", "-b", "4096", "-O", jfeatures])
        .arg(&jdev)
        .arg("4M"));
    assert!(o.status.success(), "{o:?}");
    // mke2fs takes only a block device as the journal.
    let o = run(Command::new("losetup").args(["-f", "--show"]).arg(&jdev));
    let lo = String::from_utf8_lossy(&o.stdout).trim().to_string();
    assert!(o.status.success() && !lo.is_empty());
    let made = run(Command::new("mke2fs")
        .args(["-q", "-F", "-b", "4096", "-t", "ext4", "-J"])
        .arg(format!("device={lo}"))
        .arg(&img)
        .arg("64M"));
    let _ = run(Command::new("losetup").args(["-d", &lo]));
    assert!(made.status.success(), "{made:?}");
    (jdev, img)
}

/// A journal UUID beside a journal inode: e2fsck takes the UUID's word
/// that the journal is on another device, cannot find it and stops (exit
/// 12); we say so and check the rest (errors left: exit 4, -n or -y),
/// changing nothing but, under -y, the superblock (its state not clean, as
/// e2fsck leaves a filesystem it could not fix, and its times).
#[test]
fn journal_uuid_beside_a_journal_inode() {
    if !have("debugfs") || !have("e2fsck") || !have("mke2fs") {
        eprintln!("SKIP: needs debugfs, e2fsck and mke2fs");
        return;
    }
    let dir = TempDir::new("stray-journal-uuid");
    let img = dir.path("fs.img");
    make_image(
        Command::new("mke2fs"),
        &["-t", "ext4", "-O", "^metadata_csum"],
        &img,
        "16M",
    )
    .unwrap();
    debugfs(
        &img,
        &["ssv journal_uuid 00000000-0000-0000-0000-008000000000".to_string()],
    );
    let before = std::fs::read(&img).unwrap();
    let words = "Can't find external journal";
    for flag in ["-fn", "-fy"] {
        let theirs = tool(Command::new("e2fsck").arg(flag).arg(&img));
        let ours = tool(ext4r().args(["fsck", flag]).arg(&img));
        assert!(theirs.1.contains(words), "e2fsck {flag}: {}", theirs.1);
        assert!(ours.1.contains(words), "ours {flag}: {}", ours.1);
        assert_eq!((theirs.0 & 4, ours.0), (4, 4), "{flag}: {}", ours.1);
        let after = std::fs::read(&img).unwrap();
        if flag == "-fy" {
            // s_state (offset 0x3a in the superblock): VALID cleared; its
            // times stamped; nothing else.
            assert_eq!(after[1024 + 0x3a] & 1, 0, "-fy left the state clean");
            assert!(after[..1024] == before[..1024] && after[2048..] == before[2048..]);
        } else {
            assert!(after == before, "{flag} changed the image");
        }
    }
}

/// An external journal shared by two filesystems (`s_nr_users` 2): e2fsck
/// stops with PR_0_JOURNAL_UNSUPP_MULTIFS before judging the rest of the
/// journal, and so do we (exit 12: the check stopped, with errors left).
#[test]
fn external_journal_with_two_users() {
    if !is_root() || !have("losetup") || !have("e2fsck") {
        eprintln!("SKIP: needs root, losetup and e2fsck");
        return;
    }
    let dir = TempDir::new("multifs");
    let (jdev, img) = with_external_journal(&dir, "journal_dev");
    // s_nr_users (big-endian) in the JBD2 superblock, block 1.
    let mut raw = std::fs::read(&jdev).unwrap();
    raw[4096 + 64..4096 + 68].copy_from_slice(&2u32.to_be_bytes());
    std::fs::write(&jdev, raw).unwrap();
    let words = "External journal has multiple filesystem users (unsupported).";
    for flag in ["-fn", "-fy"] {
        let theirs = tool(
            Command::new("e2fsck")
                .args([flag, "-j"])
                .arg(&jdev)
                .arg(&img),
        );
        let ours = tool(ext4r().args(["fsck", flag, "-j"]).arg(&jdev).arg(&img));
        assert!(theirs.1.contains(words), "e2fsck {flag}: {}", theirs.1);
        assert!(ours.1.contains(words), "ours {flag}: {}", ours.1);
        assert_eq!((theirs.0, ours.0), (12, 12), "{flag}: {}", ours.1);
    }
}

/// The journal device's own superblock checksum wrong: said by -n (exit
/// 0), set right by -y (exit 0: the filesystem is not changed), after
/// which e2fsck finds nothing.
#[test]
fn external_journal_superblock_checksum() {
    if !is_root() || !have("losetup") || !have("e2fsck") {
        eprintln!("SKIP: needs root, losetup and e2fsck");
        return;
    }
    let dir = TempDir::new("extcsum");
    let (jdev, img) = with_external_journal(&dir, "journal_dev,metadata_csum");
    // A byte of s_volume_name, the checksum left as it was.
    let mut raw = std::fs::read(&jdev).unwrap();
    raw[1024 + 120] = b'X';
    std::fs::write(&jdev, raw).unwrap();
    let words = "External journal superblock checksum does not match superblock.  Fix? ";
    let (j2, i2) = (dir.path("j2.img"), dir.path("i2.img"));
    copy_sparse(&jdev, &j2).unwrap();
    copy_sparse(&img, &i2).unwrap();
    for flag in ["-fn", "-fy"] {
        let theirs = tool(Command::new("e2fsck").args([flag, "-j"]).arg(&j2).arg(&i2));
        let ours = tool(ext4r().args(["fsck", flag, "-j"]).arg(&jdev).arg(&img));
        assert!(theirs.1.contains(words), "e2fsck {flag}: {}", theirs.1);
        assert!(ours.1.contains(words), "ours {flag}: {}", ours.1);
        assert_eq!((theirs.0, ours.0), (0, 0), "{flag}: {}", ours.1);
    }
    let after = tool(
        Command::new("e2fsck")
            .args(["-fn", "-j"])
            .arg(&jdev)
            .arg(&img),
    );
    assert!(after.0 == 0 && !after.1.contains(words), "{}", after.1);
    let again = tool(ext4r().args(["fsck", "-fn", "-j"]).arg(&jdev).arg(&img));
    assert!(again.0 == 0 && !again.1.contains(words), "{}", again.1);
}

/// A bigalloc file whose extent root (depth 1) has its index's logical
/// start damaged past the end of the file (damage seed 2, cases 119 and
/// 197): e2fsck sets the start from the node below and keeps the file;
/// so do we, its contents unchanged.
#[test]
fn damaged_root_index_start_keeps_the_file() {
    if !have("debugfs") || !have("e2fsck") || !have("mke2fs") {
        eprintln!("SKIP: needs debugfs, e2fsck and mke2fs");
        return;
    }
    let dir = TempDir::new("root-index");
    let img = dir.path("fs.img");
    make_image(
        Command::new("mke2fs"),
        &["-t", "ext4", "-O", "bigalloc", "-C", "16384"],
        &img,
        "64M",
    )
    .unwrap();
    let data = dir.path("data");
    let bytes: Vec<u8> = (0..800 * 1024u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(&data, &bytes).unwrap();
    let mut cmds = vec![format!("write {} f", data.display())];
    // Holes of a cluster each: seven extents, more than the root holds.
    for k in 0..6 {
        cmds.push(format!("punch /f {} {}", 4 + 8 * k, 7 + 8 * k));
    }
    debugfs(&img, &cmds);
    let before = run(Command::new("debugfs").args(["-R", "cat /f"]).arg(&img)).stdout;
    assert!(
        debugfs_out(&img, "ex /f").contains(" 0/ 1 "),
        "not a depth-1 tree"
    );
    // i_block word 3: the root's first index entry's logical start.
    debugfs(&img, &["sif /f block[3] 405100293".to_string()]);
    let words = "Logical start 405100293 does not match logical start 0 at next level.";
    let theirs = tool(Command::new("e2fsck").arg("-fn").arg(&img));
    let ours = tool(ext4r().args(["fsck", "-fn"]).arg(&img));
    assert!(
        theirs.1.contains(words) && ours.1.contains(words),
        "{}",
        ours.1
    );
    assert_eq!((theirs.0, ours.0), (4, 4));
    let (rc, out) = tool(ext4r().args(["fsck", "-fy"]).arg(&img));
    assert_eq!(rc, 1, "{out}");
    let after = run(Command::new("debugfs").args(["-R", "cat /f"]).arg(&img)).stdout;
    assert!(after == before, "the file changed:\n{out}");
    assert_eq!(tool(Command::new("e2fsck").arg("-fn").arg(&img)).0, 0);
    assert_eq!(tool(ext4r().args(["fsck", "-fn"]).arg(&img)).0, 0);
}

/// Gives the in-inode xattr `name` (its stored suffix) of `path` a hash
/// that matches neither variant, the inode's checksum restamped (debugfs
/// cannot reach an entry's hash).
fn damage_ibody_hash(img: &Path, path: &str, name: &[u8]) {
    use std::os::unix::fs::FileExt;
    let bs: u64 = debugfs_out(img, "stats")
        .split("Block size:")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .expect("block size");
    // "located at block B, offset 0xOFF"
    let at = debugfs_out(img, &format!("imap {path}"));
    let mut w = at
        .split("located at block ")
        .nth(1)
        .expect("imap")
        .split(", offset ");
    let blk: u64 = w.next().unwrap().trim().parse().unwrap();
    let off = u64::from_str_radix(w.next().unwrap().trim().trim_start_matches("0x"), 16).unwrap();
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(img)
        .unwrap();
    let mut rec = [0u8; 256];
    f.read_exact_at(&mut rec, blk * bs + off).unwrap();
    let start = 128 + usize::from(u16::from_le_bytes([rec[0x80], rec[0x81]]));
    assert_eq!(rec[start..start + 4], 0xEA02_0000u32.to_le_bytes());
    let mut e = start + 4;
    while rec[e..e + 4] != [0; 4] {
        let len = usize::from(rec[e]);
        if &rec[e + 16..e + 16 + len] == name {
            let h = u32::from_le_bytes(rec[e + 12..e + 16].try_into().unwrap());
            let bad = if h == 0 { 0x1234_5678 } else { h ^ 0x0101_0101 };
            f.write_all_at(&bad.to_le_bytes(), blk * bs + off + e as u64 + 12)
                .unwrap();
            debugfs(img, &[format!("sif {path} checksum calc")]);
            return;
        }
        e += (16 + len + 3) & !3;
    }
    panic!("no in-inode xattr {name:?} on {path}");
}

/// A file's contents as debugfs reads them.
fn cat(img: &Path, path: &str) -> Vec<u8> {
    run(Command::new("debugfs")
        .args(["-R", &format!("cat {path}")])
        .arg(img))
    .stdout
}

/// An inline-data file whose in-inode xattrs (its `system.data`, or another
/// one beside it) have a wrong hash and nothing else wrong (damage seed 13
/// case 34). e2fsck aborts on it (libext2fs's reader takes the hash for an
/// old Lustre reference and reads inode 0), leaving the file as it is; we
/// clear the area as e2fsck's PR_1_ATTR_HASH does elsewhere, and then
/// truncated the file for its lost `system.data`. Now the hash is
/// rewritten: the contents and every xattr stay, and e2fsck finds nothing.
#[test]
fn inline_data_bad_attr_hash_keeps_the_file() {
    if !have("debugfs") || !have("e2fsck") || !have("mke2fs") {
        eprintln!("SKIP: needs debugfs, e2fsck and mke2fs");
        return;
    }
    let dir = TempDir::new("inline-hash");
    // 80 bytes: 60 in i_block, 20 in system.data's value.
    let data = dir.path("data");
    let bytes: Vec<u8> = (0..80u8).map(|i| i.wrapping_mul(37) ^ 0x5a).collect();
    std::fs::write(&data, &bytes).unwrap();
    for (which, name) in [("system.data", &b"data"[..]), ("user.foo", &b"foo"[..])] {
        let img = dir.path(&format!("{name:?}.img"));
        make_image(
            Command::new("mke2fs"),
            &["-t", "ext4", "-O", "inline_data", "-I", "256"],
            &img,
            "32M",
        )
        .unwrap();
        debugfs(
            &img,
            &[
                format!("write {} f", data.display()),
                "ea_set /f user.foo bar".to_string(),
            ],
        );
        assert!(debugfs_out(&img, "stat /f").contains("Size of inline data: 80"));
        damage_ibody_hash(&img, "/f", name);
        // What the rule stands on: e2fsck 1.47 has no repair here.
        let theirs = tool(Command::new("e2fsck").arg("-fn").arg(&img));
        assert_eq!(theirs.0, 8, "{which}: e2fsck -fn\n{}", theirs.1);
        let words = format!("Extended attribute {which} in inline data inode 12 has a hash");
        let (rc, out) = tool(ext4r().args(["fsck", "-fn"]).arg(&img));
        assert!(
            rc == 4 && out.contains(&words),
            "{which}: -fn exit {rc}\n{out}"
        );
        let (rc, out) = tool(ext4r().args(["fsck", "-fy"]).arg(&img));
        assert!(
            rc == 1 && out.contains(&words),
            "{which}: -fy exit {rc}\n{out}"
        );
        assert!(!out.contains("INLINE_DATA_FL"), "{which}: truncated\n{out}");
        assert_eq!(cat(&img, "/f"), bytes, "{which}: contents\n{out}");
        let xattrs = debugfs_out(&img, "ea_list /f");
        assert!(
            xattrs.contains("system.data (20)") && xattrs.contains("user.foo (3) = \"bar\""),
            "{which}: {xattrs}"
        );
        let after = tool(Command::new("e2fsck").arg("-fn").arg(&img));
        assert_eq!(after.0, 0, "{which}: e2fsck -fn after our -fy\n{}", after.1);
        let again = tool(ext4r().args(["fsck", "-fn"]).arg(&img));
        assert_eq!(again.0, 0, "{which}: our second -fn\n{}", again.1);
    }
}

/// The same wrong hash on an ordinary file's in-inode xattr: e2fsck's
/// check_ea_in_inode meets it (PR_1_ATTR_HASH) and clears the whole area;
/// so do we (the restamp is only where e2fsck has no repair).
#[test]
fn bad_attr_hash_outside_inline_data_is_cleared_as_e2fsck() {
    if !have("debugfs") || !have("e2fsck") || !have("mke2fs") {
        eprintln!("SKIP: needs debugfs, e2fsck and mke2fs");
        return;
    }
    let dir = TempDir::new("ibody-hash");
    let img = dir.path("fs.img");
    make_image(
        Command::new("mke2fs"),
        &["-t", "ext4", "-I", "256"],
        &img,
        "32M",
    )
    .unwrap();
    let data = dir.path("data");
    std::fs::write(&data, vec![0x42u8; 3000]).unwrap();
    debugfs(
        &img,
        &[
            format!("write {} f", data.display()),
            "ea_set /f user.foo bar".to_string(),
            "ea_set /f user.bar baz".to_string(),
        ],
    );
    damage_ibody_hash(&img, "/f", b"foo");
    let theirs_img = dir.path("theirs.img");
    copy_sparse(&img, &theirs_img).unwrap();
    let theirs = tool(Command::new("e2fsck").arg("-fn").arg(&img));
    let ours = tool(ext4r().args(["fsck", "-fn"]).arg(&img));
    assert!(
        theirs
            .1
            .contains("Extended attribute in inode 12 has a hash"),
        "{}",
        theirs.1
    );
    assert_eq!((theirs.0, ours.0), (4, 4), "{}", ours.1);
    assert!(!ours.1.contains("inline data inode"), "{}", ours.1);
    let theirs = tool(Command::new("e2fsck").arg("-fy").arg(&theirs_img));
    let ours = tool(ext4r().args(["fsck", "-fy"]).arg(&img));
    assert_eq!((theirs.0, ours.0), (1, 1), "{}", ours.1);
    // Both in-inode xattrs gone, the file itself kept.
    let xattrs = |i: &Path| debugfs_out(i, "ea_list /f");
    assert_eq!(xattrs(&img), xattrs(&theirs_img));
    assert!(!xattrs(&img).contains("user."), "{}", xattrs(&img));
    assert_eq!(cat(&img, "/f"), vec![0x42u8; 3000]);
    assert_eq!(tool(Command::new("e2fsck").arg("-fn").arg(&img)).0, 0);
    assert_eq!(tool(ext4r().args(["fsck", "-fn"]).arg(&img)).0, 0);
}

/// A loop device attached here, detached when dropped (also when a
/// test fails).
struct LoopDev(String);

impl LoopDev {
    fn attach(img: &Path) -> LoopDev {
        let o = run(Command::new("losetup").args(["-f", "--show"]).arg(img));
        let dev = String::from_utf8_lossy(&o.stdout).trim().to_string();
        assert!(o.status.success() && !dev.is_empty(), "{o:?}");
        LoopDev(dev)
    }
}

impl Drop for LoopDev {
    fn drop(&mut self) {
        let _ = run(Command::new("losetup").args(["-d", &self.0]));
    }
}

/// The superblock's hint for its external journal's device
/// (`s_journal_dev`) not the device blkid finds the journal's UUID on
/// (PR_0_EXTERNAL_JOURNAL_HINT): said by -n without counting as an error
/// (exit 0, as e2fsck), set by -y (exit 1), after which neither finds it.
#[test]
fn external_journal_device_hint() {
    if !is_root() || !have("losetup") || !have("e2fsck") || !have("debugfs") {
        eprintln!("SKIP: needs root, losetup, debugfs and e2fsck");
        return;
    }
    let dir = TempDir::new("jhint");
    let (jdev, img) = with_external_journal(&dir, "journal_dev");
    debugfs(&img, &["ssv journal_dev 0x1234".to_string()]);
    let lo = LoopDev::attach(&jdev);
    let rdev = {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(&lo.0).unwrap().rdev()
    };
    let words = format!("Superblock hint for external superblock should be {rdev:#x}.  Fix? ");
    let theirs_img = dir.path("theirs.img");
    copy_sparse(&img, &theirs_img).unwrap();
    for (flag, rc) in [("-fn", 0), ("-fy", 1)] {
        let theirs = tool(
            Command::new("e2fsck")
                .args([flag, "-j", &lo.0])
                .arg(&theirs_img),
        );
        let ours = tool(ext4r().args(["fsck", flag, "-j", &lo.0]).arg(&img));
        assert!(theirs.1.contains(&words), "e2fsck {flag}: {}", theirs.1);
        assert!(ours.1.contains(&words), "ours {flag}: {}", ours.1);
        assert_eq!((theirs.0, ours.0), (rc, rc), "{flag}: {}", ours.1);
    }
    let after = tool(Command::new("e2fsck").args(["-fn", "-j", &lo.0]).arg(&img));
    assert!(after.0 == 0 && !after.1.contains(&words), "{}", after.1);
    let again = tool(ext4r().args(["fsck", "-fn", "-j", &lo.0]).arg(&img));
    assert!(again.0 == 0 && !again.1.contains(&words), "{}", again.1);
}

/// Runs debugfs requests from a script (one process for all of them).
fn debugfs_script(img: &Path, dir: &Path, cmds: &[String]) {
    let script = dir.join("debugfs-script");
    std::fs::write(&script, cmds.join("\n") + "\n").unwrap();
    let o = run(Command::new("debugfs")
        .args(["-w", "-f"])
        .arg(&script)
        .arg(img));
    assert!(o.status.success(), "debugfs -f {cmds:?}");
}

/// Every name under `path` (recursively) with its inode, as debugfs
/// reads them.
fn names_under(img: &Path, path: &str, out: &mut Vec<String>) {
    for line in debugfs_out(img, &format!("ls -p {path}")).lines() {
        // "/ino/mode/uid/gid/name/size/"
        let f: Vec<&str> = line.split('/').collect();
        if f.len() < 7 || f[5] == "." || f[5] == ".." || f[1] == "0" {
            continue;
        }
        let child = format!("{}/{}", path.trim_end_matches('/'), f[5]);
        out.push(format!("{child} {}", f[1]));
        if f[2].starts_with("40") {
            names_under(img, &child, out);
        }
    }
}

/// /a: a directory of `files` names of 12 bytes: 50 fill its block #0
/// (1 KiB) to the byte, so that a name added past 50 goes to block #1.
fn filled_dir(files: u32) -> Vec<String> {
    let mut cmds = vec!["mkdir a".to_string()];
    cmds.extend((1..=files).map(|k| format!("write /dev/null a/file-{k:07}")));
    cmds
}

/// /i/sub, a directory, named again as /a/x. With `in_value`, /i is an
/// inline directory whose one record, 'sub', is in its system.data value
/// (e2fsck's block #1 of it), not in `i_block`.
fn second_name(img: &Path, dir: &Path, files: u32, in_value: bool) {
    let mut cmds = filled_dir(files);
    cmds.extend(["mkdir i", "mkdir i/sub", "link i/sub a/x"].map(String::from));
    debugfs_script(img, dir, &cmds);
    if in_value {
        let sub = inum(img, "/i/sub");
        let mut rec = sub.to_le_bytes().to_vec();
        // rec_len 12, name_len 3, a directory; "sub" and a pad byte.
        rec.extend([12, 0, 3, 2]);
        rec.extend(b"sub\0");
        let value = dir.join("value");
        std::fs::write(&value, rec).unwrap();
        debugfs_script(
            img,
            dir,
            &[
                "unlink i/sub".to_string(),
                format!("ea_set -f {} i system.data", value.display()),
                "sif i size 72".to_string(),
            ],
        );
    }
}

/// A directory named twice: e2fsck's pass 2 keeps the first entry it
/// meets in its order of directory blocks and clears the other
/// (PR_2_LINK_DIR). With dir_index that order is every directory's block
/// #0 first, then the others, each by block number; without, by block
/// number alone. An inline directory's `i_block` records are its block
/// #0, its system.data value's its block #1, both at block number 0. We
/// must clear the same entry and keep every name e2fsck keeps.
#[test]
fn a_second_name_of_a_directory_is_cleared_where_e2fsck_clears_it() {
    if !have("debugfs") || !have("e2fsck") || !have("mke2fs") {
        eprintln!("SKIP: needs debugfs, e2fsck and mke2fs");
        return;
    }
    type Setup = fn(&Path, &Path);
    const DX: &[&str] = &["-t", "ext4", "-b", "1024"];
    const NO_DX: &[&str] = &["-t", "ext4", "-b", "1024", "-O", "^dir_index"];
    const INLINE: &[&str] = &["-t", "ext4", "-b", "1024", "-I", "256", "-O", "inline_data"];
    const INLINE_NO_DX: &[&str] = &[
        "-t",
        "ext4",
        "-b",
        "1024",
        "-I",
        "256",
        "-O",
        "inline_data,^dir_index",
    ];
    // /a's block #1 (x) lies below /b's block #0 (sub).
    let low_block1: Setup = |img, dir| {
        let mut cmds = filled_dir(60);
        cmds.extend(["mkdir b", "mkdir b/sub", "link b/sub a/x"].map(String::from));
        debugfs_script(img, dir, &cmds);
    };
    let cases: &[(&str, &[&str], Setup, &str)] = &[
        (
            "block #1 below a block #0",
            DX,
            low_block1,
            "Entry 'x' in /a ",
        ),
        (
            "the same without dir_index",
            NO_DX,
            low_block1,
            "Entry 'sub' in /b ",
        ),
        (
            "inline i_block before a block #0",
            INLINE,
            |i, d| second_name(i, d, 20, false),
            "Entry 'x' in /a ",
        ),
        (
            "inline i_block without dir_index",
            INLINE_NO_DX,
            |i, d| second_name(i, d, 20, false),
            "Entry 'x' in /a ",
        ),
        (
            "inline value before a block #1",
            INLINE,
            |i, d| second_name(i, d, 60, true),
            "Entry 'x' in /a ",
        ),
        (
            "inline value after a block #0",
            INLINE,
            |i, d| second_name(i, d, 20, true),
            "Entry 'sub' in /i ",
        ),
        (
            "inline value without dir_index",
            INLINE_NO_DX,
            |i, d| second_name(i, d, 20, true),
            "Entry 'x' in /a ",
        ),
    ];
    let dir = TempDir::new("link-dir");
    let links = |out: &str| -> Vec<String> {
        out.lines()
            .filter(|l| l.contains("is a link to directory"))
            .map(String::from)
            .collect()
    };
    let mut failed = Vec::new();
    for &(name, mkfs, setup, cleared) in cases {
        let base = dir.path("base.img");
        make_image(Command::new("mke2fs"), mkfs, &base, "8M").unwrap();
        setup(&base, &dir.0);
        let copy = |tag: &str| {
            let p = dir.path(&format!("{tag}.img"));
            copy_sparse(&base, &p).unwrap();
            p
        };
        let mut why = Vec::new();
        for flag in ["-fn", "-fy"] {
            let (theirs_img, ours_img) = (copy("theirs"), copy("ours"));
            let theirs = tool(Command::new("e2fsck").arg(flag).arg(&theirs_img));
            let ours = tool(ext4r().args(["fsck", flag]).arg(&ours_img));
            let (tl, ol) = (links(&theirs.1), links(&ours.1));
            if tl.len() != 1 || !tl[0].starts_with(cleared) {
                why.push(format!("{flag}: e2fsck clears {tl:?}, not {cleared:?}"));
            }
            if ol != tl {
                why.push(format!("{flag}: we clear {ol:?}, e2fsck {tl:?}"));
            }
            if flag == "-fy" {
                let (mut tn, mut on) = (Vec::new(), Vec::new());
                names_under(&theirs_img, "/", &mut tn);
                names_under(&ours_img, "/", &mut on);
                if tn != on {
                    why.push(format!("names after -fy: ours {on:?}\ne2fsck {tn:?}"));
                }
                let after = tool(Command::new("e2fsck").arg("-fn").arg(&ours_img));
                let again = tool(ext4r().args(["fsck", "-fn"]).arg(&ours_img));
                if after.0 != 0 || again.0 != 0 {
                    why.push(format!(
                        "after our -fy: e2fsck -fn {}, ours {}\n{}",
                        after.0, again.0, after.1
                    ));
                }
                if !why.is_empty() {
                    why.push(format!(
                        "--- e2fsck -fy:\n{}\n--- ours:\n{}",
                        theirs.1, ours.1
                    ));
                }
            }
        }
        if why.is_empty() {
            println!("ok: {name}");
        } else {
            println!("FAILED: {name}\n{}", why.join("\n"));
            failed.push(name);
        }
    }
    assert!(failed.is_empty(), "failed: {failed:?}");
}

/// A reserved inode's xattr block address out of range (the journal's,
/// the resize inode's): e2fsck marks the inode bad and judges it in pass
/// 2 only when an entry names it, which no entry may; it says nothing and
/// leaves the field. So do we (exit 0 under -n and -y).
#[test]
fn a_reserved_inodes_bad_xattr_block_is_left_as_e2fsck_leaves_it() {
    if !have("debugfs") || !have("e2fsck") || !have("mke2fs") {
        eprintln!("SKIP: needs debugfs, e2fsck and mke2fs");
        return;
    }
    let dir = TempDir::new("reserved-file-acl");
    for ino in [7, 8] {
        let img = dir.path(&format!("r{ino}.img"));
        make_image(
            Command::new("mke2fs"),
            &["-t", "ext4", "-O", "^metadata_csum"],
            &img,
            "64M",
        )
        .unwrap();
        debugfs(&img, &[format!("sif <{ino}> file_acl 99999999")]);
        for flag in ["-fn", "-fy"] {
            let theirs = tool(Command::new("e2fsck").arg(flag).arg(&img));
            let ours = tool(ext4r().args(["fsck", flag]).arg(&img));
            assert_eq!((theirs.0, ours.0), (0, 0), "inode {ino} {flag}: {}", ours.1);
        }
        assert!(debugfs_out(&img, &format!("stat <{ino}>")).contains("File ACL: 99999999"));
    }
}
