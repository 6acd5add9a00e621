//! mkfs.ext4r against mke2fs over a matrix of sizes, block sizes, feature
//! sets and usage types: e2fsck -fn must pass on every image we make, and
//! dumpe2fs of our image must equal mke2fs's (times, checksums, lifetime
//! writes masked) for the same options, UUID, hash seed and time.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use std::sync::Mutex;

/// (size, arguments). Every configuration is one mke2fs accepts.
const CONFIGS: &[(&str, &str)] = &[
    ("1M", "-t ext4"),
    ("2M", "-t ext2"),
    ("8M", "-t ext4"),
    ("20M", "-t ext4 -b 4096"),
    ("64M", "-t ext4"),
    ("64M", "-t ext4 -O orphan_file"),
    ("100M", "-t ext4"),
    ("128M", "-t ext3"),
    ("128M", "-t ext2"),
    ("300M", "-t ext4 -b 2048 -O ^has_journal"),
    ("513M", "-t ext4"),
    ("1G", "-t ext4"),
    ("1G", "-t ext4 -b 1024"),
    ("1G", "-t ext4 -b 2048"),
    ("1G", "-t ext3"),
    ("1G", "-t ext3 -b 1024"),
    ("1G", "-t ext2"),
    ("1G", "-t ext2 -o hurd"),
    ("1G", "-t ext4 -O ^flex_bg"),
    ("1G", "-t ext4 -O ^64bit"),
    ("1G", "-t ext4 -O ^metadata_csum,uninit_bg"),
    ("1G", "-t ext4 -O ^metadata_csum,uninit_bg,^64bit -b 1024"),
    ("1G", "-t ext4 -G 4"),
    ("1G", "-t ext4 -G 64"),
    ("1G", "-t ext4 -O ^resize_inode"),
    ("1G", "-t ext4 -O meta_bg,^resize_inode"),
    ("1G", "-t ext4 -O meta_bg,^resize_inode,^flex_bg -b 1024"),
    ("1G", "-t ext4 -O sparse_super2"),
    ("1G", "-t ext4 -O sparse_super2 -E num_backup_sb=1"),
    ("1G", "-t ext4 -O sparse_super2 -E num_backup_sb=0"),
    ("1G", "-t ext4 -O metadata_csum_seed"),
    ("1G", "-t ext4 -O orphan_file"),
    ("1G", "-t ext4 -O ^has_journal"),
    ("1G", "-t ext4 -T news"),
    ("1G", "-t ext4 -T largefile"),
    ("1G", "-t ext4 -T largefile4"),
    ("1G", "-t ext4 -T small"),
    ("1G", "-t ext4 -T floppy"),
    ("1G", "-t ext4 -T big"),
    ("1G", "-t ext4 -T huge"),
    ("1G", "-t ext4 -I 128"),
    ("1G", "-t ext4 -I 512"),
    ("1G", "-t ext4 -i 8192"),
    ("1G", "-t ext4 -N 100000"),
    ("1G", "-t ext4 -m 0"),
    ("1G", "-t ext4 -m 10"),
    ("1G", "-t ext4 -g 16384"),
    ("1G", "-t ext4 -b 2048 -g 8192"),
    ("1G", "-t ext4 -J size=4"),
    ("1G", "-t ext4 -J size=64"),
    ("1G", "-t ext3 -J size=16"),
    ("1G", "-t ext4 -E stride=16,stripe_width=64"),
    ("1G", "-t ext4 -O ^flex_bg -E stride=16"),
    ("1G", "-t ext4 -E root_owner=1000:1000"),
    ("1G", "-t ext4 -L label -M /mnt/data -e remount-ro"),
    ("1G", "-t ext4 -E nodiscard"),
    ("1G", "-t ext4 -E lazy_itable_init=0,nodiscard"),
    ("1G", "-t ext4 -E lazy_journal_init=1"),
    ("1G", "-t ext4 -E packed_meta_blocks=1"),
    ("1G", "-t ext4 -b 1024 -E packed_meta_blocks=1"),
    ("1G", "-t ext4 -O ^flex_bg -E packed_meta_blocks=1"),
    ("1G", "-t ext3 -E packed_meta_blocks=1"),
    ("17G", "-t ext4 -E packed_meta_blocks=1"),
    ("1G", "-t ext4 -O inline_data"),
    ("1G", "-t ext4 -O inline_data -b 1024"),
    ("64M", "-t ext4 -O casefold"),
    ("1G", "-t ext4 -E encoding=utf8"),
    (
        "1G",
        "-t ext4 -O casefold -E encoding=utf8-12.1,encoding_flags=strict",
    ),
    (
        "1G",
        "-t ext2 -O casefold -E encoding_flags=strict-nostrict",
    ),
    ("1G", "-t ext4 -O encrypt"),
    ("1G", "-t ext4 -b 3000"),
    ("1G", "-t ext4 -O bigalloc"),
    ("1G", "-t ext4 -O bigalloc -C 65536"),
    ("64M", "-t ext4 -O bigalloc"),
    ("256M", "-t ext4 -O bigalloc -C 16384"),
    ("1G", "-t ext4 -O bigalloc -C 16384"),
    ("1G", "-t ext4 -O bigalloc -b 1024"),
    ("1G", "-t ext4 -O bigalloc -b 1024 -C 65536"),
    ("100M", "-t ext4 -O bigalloc -b 1024 -C 2048"),
    ("1G", "-t ext4 -O bigalloc -C 4096"),
    ("1G", "-t ext4 -O bigalloc -C 1048576"),
    ("1G", "-t ext4 -O bigalloc,^flex_bg"),
    ("1G", "-t ext4 -O bigalloc,^metadata_csum,uninit_bg"),
    ("1G", "-t ext4 -O bigalloc,orphan_file"),
    ("1G", "-t ext4 -O bigalloc,inline_data"),
    ("1G", "-t ext4 -O bigalloc,meta_bg,^resize_inode -C 16384"),
    ("1G", "-t ext4 -O bigalloc -g 4096 -C 16384"),
    ("4G", "-t ext4 -O bigalloc -C 8192"),
    ("9G", "-t ext4 -O bigalloc"),
    ("9G", "-t ext4 -O bigalloc,^64bit -C 16384"),
    ("9G", "-t ext4 -O bigalloc,^flex_bg -C 16384"),
    ("20G", "-t ext4 -O bigalloc -C 16384 -J size=1024"),
    ("1G", "-t ext4 -O quota"),
    ("64M", "-t ext4 -O quota"),
    (
        "1G",
        "-t ext4 -O quota -b 1024 -E quotatype=usrquota:grpquota:prjquota",
    ),
    (
        "1G",
        "-t ext4 -O quota -b 2048 -E quotatype=prj,root_owner=1000:2000",
    ),
    (
        "1G",
        "-t ext4 -O quota -E quotatype=usr:grp:prj,root_owner=1000:1000",
    ),
    ("1G", "-t ext4 -O quota,project"),
    ("1G", "-t ext4 -O quota,orphan_file"),
    ("1G", "-t ext4 -O quota,bigalloc"),
    (
        "1G",
        "-t ext4 -O quota,bigalloc -b 1024 -C 16384 -E quotatype=usr:grp:prj",
    ),
    ("1G", "-t ext4 -O quota,^metadata_csum"),
    ("1G", "-t ext4 -O quota -I 128"),
    ("1G", "-t ext3 -O quota"),
    ("1G", "-t ext3 -O quota -b 1024"),
    ("1G", "-t ext4 -O fast_commit"),
    ("100M", "-t ext4 -O fast_commit -b 1024"),
    ("1G", "-t ext4 -O fast_commit -J size=64"),
    ("1G", "-t ext4 -O fast_commit -J fast_commit_size=2048"),
    ("1G", "-t ext4 -O fast_commit,^64bit,^metadata_csum"),
    ("4G", "-t ext4"),
    ("4G", "-t ext4 -O ^metadata_csum,uninit_bg"),
    ("17G", "-t ext4"),
    ("17G", "-t ext3"),
    ("257G", "-t ext4"),
    ("257G", "-t ext4 -O ^flex_bg"),
    ("1T", "-t ext4"),
    ("1T", "-t ext4 -O meta_bg,^resize_inode"),
    ("5T", "-t ext4 -O ^64bit"),
    ("15T", "-t ext4"),
    ("15T", "-t ext4 -O ^metadata_csum,uninit_bg"),
];

/// Configurations whose layout is known to differ from mke2fs's, or that
/// mkfs.ext4r refuses: the gaps still open, stated here and in the README
/// so the count below stays honest. The goal is an empty list.
const KNOWN_GAPS: &[&str] = &[];

/// Configurations whose dumpe2fs matches but whose bytes still differ
/// somewhere (beyond superblock checksums and lifetime writes).
const BYTE_GAPS: &[&str] = &[];

#[test]
fn mkfs_matches_mke2fs_and_passes_e2fsck() {
    for t in ["mke2fs", "e2fsck", "dumpe2fs", "truncate"] {
        if !have(t) {
            eprintln!("SKIP: {t} not installed");
            return;
        }
    }
    let dir = TempDir::new("matrix");
    let results = Mutex::new(Vec::new());
    let next = Mutex::new(0usize);
    std::thread::scope(|s| {
        for worker in 0..2 {
            let (dir, results, next) = (&dir, &results, &next);
            s.spawn(move || loop {
                let i = {
                    let mut n = next.lock().unwrap();
                    let i = *n;
                    *n += 1;
                    i
                };
                let Some((size, args)) = CONFIGS.get(i) else {
                    break;
                };
                let name = format!("{size} {args}");
                let argv: Vec<&str> = args.split_whitespace().collect();
                let ours = dir.path(&format!("ours{worker}.img"));
                let theirs = dir.path(&format!("theirs{worker}.img"));
                let r = (|| -> Result<Outcome, String> {
                    make_image(ours_cmd(), &argv, &ours, size)?;
                    let (rc, out) = e2fsck_fn(&ours);
                    make_image(std::process::Command::new("mke2fs"), &argv, &theirs, size)?;
                    // Our checker must find both images clean (no false
                    // positives across the whole matrix).
                    let fsck = |img: &std::path::Path| {
                        let o = run(std::process::Command::new(env!("CARGO_BIN_EXE_ext4r"))
                            .args(["fsck", "-fn"])
                            .arg(img));
                        (
                            o.status.code(),
                            String::from_utf8_lossy(&o.stdout).into_owned(),
                        )
                    };
                    let (f1, fo1) = fsck(&ours);
                    let (f2, fo2) = fsck(&theirs);
                    let (nbytes, at) = image_diffs(&ours, &theirs, 6)?;
                    // dumpe2fs reads only the bytes: identical images (but
                    // for the fields it masks) print the same. It takes 16 s
                    // on a 15 TiB image, so it runs only where bytes differ.
                    let (a, b) = if nbytes == 0 {
                        (String::new(), String::new())
                    } else {
                        (normalized_dumpe2fs(&ours), normalized_dumpe2fs(&theirs))
                    };
                    let mut detail = String::new();
                    if rc != 0 {
                        detail += &format!("  e2fsck -fn exit {rc}:\n{}\n", tail(&out, 12));
                    }
                    if f1 != Some(0) || f2 != Some(0) {
                        detail += &format!(
                            "  fsck.ext4r -fn exit {f1:?} (ours), {f2:?} (mke2fs's):\n{}{}\n",
                            tail(&fo1, 8),
                            tail(&fo2, 8)
                        );
                    }
                    if a != b {
                        detail += &first_diffs(&a, &b, 4);
                    }
                    if nbytes != 0 {
                        let at: Vec<String> = at.iter().map(|o| format!("{o:#x}")).collect();
                        detail += &format!(
                            "  {nbytes} bytes differ from mke2fs's, first at {}\n",
                            at.join(" ")
                        );
                    }
                    Ok(Outcome {
                        clean: rc == 0,
                        fsck_clean: f1 == Some(0) && f2 == Some(0),
                        dump_equal: a == b,
                        bytes_equal: nbytes == 0,
                        detail,
                    })
                })();
                let _ = std::fs::remove_file(&ours);
                let _ = std::fs::remove_file(&theirs);
                results.lock().unwrap().push((name, r));
            });
        }
    });
    let results = results.into_inner().unwrap();
    let n = results.len();
    let (mut clean, mut equal, mut identical, mut fsck_clean) = (0, 0, 0, 0);
    let mut unexpected = Vec::new();
    for (name, r) in &results {
        let gap = KNOWN_GAPS.contains(&name.as_str());
        let byte_gap = BYTE_GAPS.contains(&name.as_str());
        match r {
            Ok(o) => {
                clean += usize::from(o.clean);
                fsck_clean += usize::from(o.fsck_clean);
                equal += usize::from(o.dump_equal);
                identical += usize::from(o.bytes_equal);
                let ok = o.clean && o.fsck_clean && o.dump_equal && (o.bytes_equal || byte_gap);
                if !(o.clean && o.fsck_clean && o.dump_equal && o.bytes_equal) {
                    println!(
                        "DIFFERS{}: {name}\n{}",
                        if gap || (ok && byte_gap) {
                            " (known gap)"
                        } else {
                            ""
                        },
                        o.detail
                    );
                }
                if !ok && !gap {
                    unexpected.push(name.clone());
                }
                if ok && gap {
                    println!("NOW MATCHES (remove from KNOWN_GAPS): {name}");
                }
                if o.bytes_equal && byte_gap {
                    println!("NOW BYTE-IDENTICAL (remove from BYTE_GAPS): {name}");
                }
            }
            Err(e) => {
                println!(
                    "FAILED{}: {name}: {e}",
                    if gap { " (known gap)" } else { "" }
                );
                if !gap {
                    unexpected.push(name.clone());
                }
            }
        }
    }
    println!("e2fsck -fn clean: {clean}/{n}");
    println!("fsck.ext4r -fn clean on ours and mke2fs's: {fsck_clean}/{n}");
    println!("dumpe2fs equal to mke2fs: {equal}/{n}");
    println!(
        "byte-identical to mke2fs (but superblock checksums, lifetime writes): {identical}/{n}"
    );
    println!(
        "known gaps: {}, byte gaps: {}",
        KNOWN_GAPS.len(),
        BYTE_GAPS.len()
    );
    assert!(
        unexpected.is_empty(),
        "unexpected failures: {unexpected:#?}"
    );
}

/// What one configuration showed.
struct Outcome {
    clean: bool,
    /// fsck.ext4r -fn exits 0 on both our image and mke2fs's.
    fsck_clean: bool,
    dump_equal: bool,
    bytes_equal: bool,
    detail: String,
}

/// Options mke2fs refuses: mkfs.ext4r must refuse them too, with the same
/// exit code and a message saying why.
const REFUSED: &[(&str, &str)] = &[
    ("1G", "-t ext4 -O bigalloc,^extent,^64bit"),
    ("1G", "-t ext4 -O ^extent"),
    ("1G", "-t ext4 -C 65536"),
    ("1G", "-t ext4 -O bigalloc -C 2048"),
    ("1G", "-t ext4 -O bigalloc -b 1024 -C 1024"),
    ("1G", "-t ext4 -O bigalloc -C 1073741824"),
    ("1G", "-t ext4 -O inline_data -I 128"),
    ("1G", "-t ext4 -O project -I 128"),
    ("1G", "-t ext4 -b 512"),
    ("1G", "-t ext4 -b 131072"),
    ("1G", "-t ext4 -I 100"),
    ("1G", "-t ext4 -G 3"),
    ("1G", "-t ext2 -G 16"),
    ("1G", "-t ext4 -O meta_bg"),
    ("1G", "-t ext4 -O metadata_csum_seed,^metadata_csum"),
    ("1G", "-t ext4 -O orphan_file,^has_journal"),
    ("1G", "-t ext4 -E encoding=latin1"),
    ("1G", "-t ext4 -O quota -E quotatype=foo"),
    ("1G", "-t ext4 -O quota -I 128 -E quotatype=prjquota"),
    ("1G", "-t ext4 -E encoding_flags=strict"),
    ("1G", "-t ext4 -O casefold -E encoding_flags=bogus"),
    ("1G", "-t ext4 -E num_backup_sb=3 -O sparse_super2"),
    ("1G", "-t ext4 -m 60"),
    ("1G", "-t ext4 -r 2"),
    ("1G", "-t ext4 -N 5000000000"),
    ("1G", "-t ext4 -J size=1"),
];

#[test]
fn mkfs_refuses_what_mke2fs_refuses() {
    if !have("mke2fs") || !have("truncate") {
        eprintln!("SKIP: mke2fs or truncate not installed");
        return;
    }
    let dir = TempDir::new("refused");
    let img = dir.path("img");
    let mut wrong = Vec::new();
    for (size, args) in REFUSED {
        let argv: Vec<&str> = args.split_whitespace().collect();
        let mke2fs = std::process::Command::new("mke2fs");
        let (theirs, _) = try_make_image(mke2fs, &argv, &img, size).unwrap();
        let (ours, out) = try_make_image(ours_cmd(), &argv, &img, size).unwrap();
        let said = out.contains("mkfs.ext4r: ");
        println!("{size} {args}: mke2fs exit {theirs}, ours {ours}");
        if theirs == 0 || ours != theirs || !said {
            wrong.push(format!(
                "{size} {args}: mke2fs {theirs}, ours {ours}: {out}"
            ));
        }
    }
    let _ = std::fs::remove_file(&img);
    assert!(wrong.is_empty(), "not refused as mke2fs does: {wrong:#?}");
}

fn tail(s: &str, n: usize) -> String {
    let l: Vec<&str> = s.lines().collect();
    l[l.len().saturating_sub(n)..].join("\n")
}
