//! tune.ext4r against tune2fs: for each option, copies of the same mke2fs
//! image are changed by tune2fs and by `ext4r tune`; their `dumpe2fs -h`
//! must be equal (with checksums, write times, random hash seeds and
//! random UUIDs masked), the images byte-identical where nothing random is
//! involved, and `e2fsck -fn` must judge ours as it judges tune2fs's.
//! `-l` must print what `tune2fs -l` prints, after the version line.

mod common;

use common::*;
use std::path::Path;
use std::process::Command;

/// Images: (name, size, mke2fs arguments).
const IMAGES: &[(&str, &str, &[&str])] = &[
    ("ext4-1k", "64M", &["-t", "ext4"]),
    (
        "ext4-4k",
        "256M",
        &["-t", "ext4", "-b", "4096", "-L", "label"],
    ),
    ("ext2-1k", "64M", &["-t", "ext2"]),
    ("ext3-4k", "256M", &["-t", "ext3", "-b", "4096"]),
    (
        "ext4-gdtcsum",
        "128M",
        &["-t", "ext4", "-O", "^metadata_csum,uninit_bg"],
    ),
    (
        "ext4-seed",
        "256M",
        &[
            "-t",
            "ext4",
            "-O",
            "metadata_csum_seed",
            "-E",
            "stride=4,stripe_width=8",
        ],
    ),
    (
        "ext4-bigalloc",
        "256M",
        &["-t", "ext4", "-O", "bigalloc", "-C", "16384"],
    ),
    (
        "ext4-metabg",
        "128M",
        &["-t", "ext4", "-O", "^resize_inode,meta_bg,casefold"],
    ),
    (
        "ext4-quota",
        "64M",
        &[
            "-t",
            "ext4",
            "-O",
            "quota,project",
            "-E",
            "quotatype=usrquota:grpquota:prjquota",
        ],
    ),
];

/// Options applied one at a time.
const OPTIONS: &[&[&str]] = &[
    &["-L", "newlabel"],
    &["-L", "a-label-longer-than-sixteen"],
    &["-M", "/mnt/data"],
    &["-c", "30"],
    &["-c", "0"],
    &["-c", "random"],
    &["-C", "7"],
    &["-e", "continue"],
    &["-e", "remount-ro"],
    &["-e", "panic"],
    &["-g", "5"],
    &["-u", "7"],
    &["-i", "2w"],
    &["-i", "3m"],
    &["-i", "10"],
    &["-i", "3600s"],
    &["-m", "2.5"],
    &["-m", "0"],
    &["-r", "1000"],
    &["-T", "20240102"],
    &["-T", "20240102030405"],
    &["-o", "acl,^user_xattr"],
    &["-o", "journal_data_writeback"],
    &["-E", "stride=16,stripe_width=64"],
    &["-E", "hash_alg=tea"],
    &["-E", "mount_opts=nodelalloc"],
    &["-E", "test_fs"],
    &["-E", "^test_fs"],
    &["-E", "force_fsck"],
    &["-U", "11111111-2222-3333-4444-555555555555"],
    &["-U", "clear"],
    &["-U", "random"],
    &["-U", "time"],
    &["-O", "metadata_csum_seed"],
    &[
        "-O",
        "metadata_csum_seed",
        "-U",
        "11111111-2222-3333-4444-555555555555",
    ],
    &["-O", "^metadata_csum_seed"],
    &["-O", "^dir_nlink"],
    &["-O", "dir_nlink"],
    &["-O", "^huge_file"],
    &["-O", "huge_file"],
    &["-O", "^extra_isize"],
    &["-O", "extra_isize"],
    &["-O", "^large_file"],
    &["-O", "large_dir"],
    &["-O", "extent"],
    &["-O", "encrypt"],
    &["-O", "stable_inodes"],
    &["-O", "dir_index"],
    &["-O", "^dir_index"],
    &["-O", "^flex_bg"],
    &["-O", "^extent"],
    &["-O", "^metadata_csum"],
    &["-O", "metadata_csum"],
    &["-O", "^metadata_csum,^uninit_bg"],
    &["-O", "^metadata_csum,uninit_bg"],
    &["-O", "^uninit_bg"],
    &["-O", "uninit_bg"],
    &["-O", "frobnicate"],
    // Inode size: these images have 256-byte inodes (tune_inode_size
    // grows 128-byte ones); both refuse alike.
    &["-I", "256"],
    &["-I", "128"],
    // Journals: added to the journal-less images, removed from the others
    // (and then added again, extent-mapped where extents are on).
    &["-j"],
    &["-J", "size=8"],
    &["-O", "has_journal"],
    &["-J", "size=4,location=20M"],
    &["-O", "^has_journal"],
    &["-O", "^has_journal", "-j"],
    &["-O", "^has_journal", "-J", "size=5"],
    &["-O", "^has_journal,quota", "-J", "size=5"],
    // Quota files: made with the usage of the inodes in use, or removed.
    &["-Q", "usrquota"],
    &["-Q", "usrquota,grpquota,prjquota"],
    &["-Q", "prjquota"],
    &["-O", "quota"],
    &["-O", "project"],
    &["-O", "^quota"],
    &["-Q", "^usrquota"],
    &["-Q", "^grpquota,prjquota"],
    &["-O", "^project"],
    &[
        "-c",
        "30",
        "-C",
        "5",
        "-e",
        "remount-ro",
        "-L",
        "all",
        "-E",
        "stride=8",
    ],
];

/// What tune2fs does and tune.ext4r refuses for now: (option, image).
/// Listed so that a new refusal is a failure.
const REFUSED: &[(&[&str], &str)] = &[];

fn refusal_expected(opt: &[&str], img: &str) -> bool {
    REFUSED.iter().any(|(o, i)| *o == opt && *i == img)
}

/// Whether the option makes tune2fs rewrite metadata beyond the
/// superblock. Its lifetime-writes count then includes blocks rewritten
/// unchanged (and depends on its I/O cache); ours counts what it wrote, so
/// that line is masked.
fn rewrites(opt: &[&str]) -> bool {
    opt.iter().any(|o| {
        o.contains("metadata_csum") && *o != "metadata_csum_seed"
            || o.contains("uninit_bg")
            || *o == "^dir_index"
            || *o == "-U"
    })
}

/// Where tune2fs is wrong and tune.ext4r is not: with bigalloc, tune2fs's
/// journal removal credits a whole cluster per freed block, so its free
/// counts come out too high and e2fsck finds them wrong; ours are right.
/// The images then differ in the free counts only.
fn deviation_expected(opt: &[&str], img: &str) -> bool {
    img == "ext4-bigalloc" && opt.iter().any(|a| a.contains("^has_journal"))
}

/// Whether a run writes quota files. tune2fs adds to the lifetime-writes
/// count what its I/O cache happened to write back before closing, which
/// depends on the cache's eviction order; that count is not reproduced.
fn writes_quota(opt: &[&str]) -> bool {
    opt.windows(2).any(|w| {
        (w[0] == "-Q" && w[1].split(',').any(|q| !q.starts_with('^')))
            || (w[0] == "-O" && w[1].split(',').any(|f| f == "quota" || f == "project"))
    })
}

/// `dumpe2fs -h` with what may legitimately differ masked.
fn dumpe2fs_h(img: &Path, opt: &[&str]) -> String {
    dumpe2fs_h_masking(img, opt, &[])
}

/// `dumpe2fs -h` masked as [`dumpe2fs_h`] and for `more` fields.
fn dumpe2fs_h_masking(img: &Path, opt: &[&str], more: &[&str]) -> String {
    let o = run(Command::new("dumpe2fs").arg("-h").arg(img));
    let random_uuid = opt.contains(&"random") && opt[0] == "-U" || opt.contains(&"time");
    let mut masked = vec![
        "Last write time",
        "Checksum",
        "Journal checksum",
        "Directory Hash Seed",
    ];
    if random_uuid {
        masked.push("Filesystem UUID");
    }
    if opt == ["-c", "random"] {
        masked.push("Maximum mount count");
    }
    if rewrites(opt) || writes_quota(opt) {
        masked.push("Lifetime writes");
    }
    masked.extend_from_slice(more);
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| match l.split_once(':') {
            Some((k, _)) if masked.contains(&k.trim()) => format!("{k}: <masked>"),
            _ => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Copies an image keeping its holes (tmpfs would fill them otherwise).
fn sparse_copy(from: &Path, to: &Path) {
    let o = run(Command::new("cp").arg("--sparse=always").arg(from).arg(to));
    assert!(o.status.success(), "cp: {o:?}");
}

fn skip_first_line(s: &str) -> &str {
    s.split_once('\n').map_or("", |(_, r)| r)
}

#[test]
fn tune_matrix() {
    for t in ["mke2fs", "tune2fs", "dumpe2fs", "e2fsck"] {
        if !have(t) {
            println!("skipped: {t} not found");
            return;
        }
    }
    let dir = TempDir::new("tune");
    let (mut total, mut equal, mut identical, mut refused) = (0, 0, 0, 0);
    let mut deviations = 0;
    // Per option: (equal, byte-identical, runs), for the journal and quota
    // options' report.
    let mut per_opt = vec![(0, 0, 0); OPTIONS.len()];
    let mut failures = Vec::new();
    let mut list_equal = 0;
    for (name, size, args) in IMAGES {
        let base = dir.path(&format!("{name}.img"));
        let _ = std::fs::remove_file(&base);
        let t = run(Command::new("truncate").args(["-s", size]).arg(&base));
        assert!(t.status.success());
        let o = run(Command::new("mke2fs")
            .env("E2FSPROGS_FAKE_TIME", FAKE_TIME)
            .env("MKE2FS_SKIP_CHECK_MSG", "1")
            .args(["-q", "-F", "-U", UUID, "-E", HASH_SEED])
            .args(*args)
            .arg(&base));
        assert!(o.status.success(), "mke2fs {args:?}: {o:?}");

        // -l
        let (rt, lt) = tune_at(Command::new("tune2fs").arg("-l"), &base);
        let (ro, lo) = tune_at(ours_tune().arg("-l"), &base);
        if rt == ro && skip_first_line(&lt) == skip_first_line(&lo) {
            list_equal += 1;
        } else {
            failures.push(format!("{name} -l:\n{}", first_diffs(&lo, &lt, 5)));
        }

        for (k, opt) in OPTIONS.iter().enumerate() {
            total += 1;
            per_opt[k].2 += 1;
            let (ti, oi) = (dir.path("t.img"), dir.path("o.img"));
            sparse_copy(&base, &ti);
            sparse_copy(&base, &oi);
            let (rt, outt) = tune_at(Command::new("tune2fs").args(*opt), &ti);
            let (ro, outo) = tune_at(ours_tune().args(*opt), &oi);
            if refusal_expected(opt, name) {
                if rt == 0 && ro == 1 {
                    refused += 1;
                } else {
                    failures.push(format!(
                        "{name} {opt:?}: expected a refusal, tune2fs {rt} ours {ro}\n{outo}"
                    ));
                }
                continue;
            }
            if rt != ro {
                failures.push(format!(
                    "{name} {opt:?}: exit tune2fs {rt}, ours {ro}\n tune2fs: {outt}\n ours: {outo}"
                ));
                continue;
            }
            if deviation_expected(opt, name) {
                let free = ["Free blocks"];
                let (dt, d_o) = (
                    dumpe2fs_h_masking(&ti, opt, &free),
                    dumpe2fs_h_masking(&oi, opt, &free),
                );
                let (fo, fo_out) = e2fsck_fn(&oi);
                if dt == d_o && fo == 0 {
                    deviations += 1;
                } else {
                    failures.push(format!(
                        "{name} {opt:?}: expected equal but for the free counts, e2fsck 0: \
                         got e2fsck {fo}\n{fo_out}\n{}",
                        first_diffs(&d_o, &dt, 5)
                    ));
                }
                continue;
            }
            let (dt, d_o) = (dumpe2fs_h(&ti, opt), dumpe2fs_h(&oi, opt));
            if dt != d_o {
                failures.push(format!(
                    "{name} {opt:?}: dumpe2fs -h differs\n{}",
                    first_diffs(&d_o, &dt, 5)
                ));
                continue;
            }
            let same_bytes = image_diffs(&ti, &oi, 4).is_ok_and(|(n, _)| n == 0);
            let (fo, fo_out) = e2fsck_fn(&oi);
            // Identical images get the same verdict; run e2fsck once.
            let ft = if same_bytes { fo } else { e2fsck_fn(&ti).0 };
            if ft != fo {
                failures.push(format!(
                    "{name} {opt:?}: e2fsck -fn tune2fs's {ft}, ours {fo}\n{fo_out}"
                ));
                continue;
            }
            equal += 1;
            per_opt[k].0 += 1;
            if same_bytes {
                identical += 1;
                per_opt[k].1 += 1;
            } else {
                println!("not byte-identical (but equal): {name} {opt:?}");
            }
        }
    }
    for (opt, (eq, ident, n)) in OPTIONS.iter().zip(&per_opt) {
        let new_kind = opt.iter().any(|a| ["-j", "-J", "-Q"].contains(a))
            || opt.windows(2).any(|w| {
                w[0] == "-O"
                    && ["has_journal", "quota", "project"]
                        .iter()
                        .any(|f| w[1].contains(f))
            });
        if new_kind {
            println!("tune {opt:?}: {eq}/{n} equal, {ident} byte-identical");
        }
    }
    println!("tune -l: {list_equal}/{} images equal", IMAGES.len());
    println!(
        "tune: {equal}/{total} options equal ({identical} byte-identical images, \
         {refused} refused as documented, {deviations} where tune2fs's free counts are wrong \
         and ours are right)"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A filesystem the kernel has mounted and written (last mount time and
/// path, lifetime writes, orphan-free state): -l still matches, and a
/// label change leaves the files intact.
#[test]
fn tune_kernel_image() {
    if !is_root() || !have("tune2fs") || !have("losetup") {
        println!("skipped: needs root, losetup and e2fsprogs");
        return;
    }
    let dir = TempDir::new("tune-kernel");
    let img = dir.path("k.img");
    let t = run(Command::new("truncate").args(["-s", "128M"]).arg(&img));
    assert!(t.status.success());
    let o = run(Command::new("mke2fs")
        .args(["-q", "-F", "-t", "ext4"])
        .arg(&img));
    assert!(o.status.success());
    {
        let Ok(mut m) = LoopMount::new(&img, &dir.path("mnt")) else {
            println!("skipped: cannot loop-mount");
            return;
        };
        std::fs::write(m.dir.join("hello.txt"), b"hello tune\n").expect("write");
        m.umount().expect("umount");
    }
    let (rt, lt) = tune_at(Command::new("tune2fs").arg("-l"), &img);
    let (ro, lo) = tune_at(ours_tune().arg("-l"), &img);
    assert_eq!(rt, ro);
    assert_eq!(
        skip_first_line(&lo),
        skip_first_line(&lt),
        "-l of a kernel-written image"
    );
    let (rc, out) = tune_at(ours_tune().args(["-L", "kern", "-c", "25"]), &img);
    assert_eq!(rc, 0, "{out}");
    let (fc, fout) = e2fsck_fn(&img);
    assert_eq!(fc, 0, "{fout}");
    let cat = run(Command::new(env!("CARGO_BIN_EXE_ext4r"))
        .args(["cat"])
        .arg(&img)
        .arg("/hello.txt"));
    assert_eq!(cat.stdout, b"hello tune\n");
    // Mounted: any change is refused, -l still works.
    let Ok(m) = LoopMount::new(&img, &dir.path("mnt")) else {
        return;
    };
    let (rc, out) = tune_at(ours_tune().args(["-L", "busy"]), &img);
    assert_eq!(
        rc, 1,
        "a change to a mounted filesystem must be refused: {out}"
    );
    assert!(out.contains("is mounted on"), "{out}");
    let (rc, _) = tune_at(ours_tune().arg("-l"), &img);
    assert_eq!(rc, 0);
    drop(m);
}

/// A journal that needs recovery is replayed first, as tune2fs does, and
/// then only the primary superblock is written (its lifetime-writes
/// counter is not reproduced and is masked).
#[test]
fn tune_replays_a_dirty_journal() {
    if !have("debugfs") || !have("tune2fs") {
        println!("skipped: needs debugfs and tune2fs");
        return;
    }
    let dir = TempDir::new("tune-journal");
    let base = dir.path("j.img");
    let t = run(Command::new("truncate").args(["-s", "64M"]).arg(&base));
    assert!(t.status.success());
    let o = run(Command::new("mke2fs")
        .args(["-q", "-F", "-t", "ext4"])
        .arg(&base));
    assert!(o.status.success());
    std::fs::write(dir.path("blk.bin"), vec![0x5a; 1024]).expect("write");
    std::fs::write(
        dir.path("cmds"),
        format!(
            "jo -c\njw -b 30000,30001 {}\njc\n",
            dir.path("blk.bin").display()
        ),
    )
    .expect("write");
    let o = run(Command::new("debugfs")
        .arg("-w")
        .arg("-f")
        .arg(dir.path("cmds"))
        .arg(&base));
    assert!(o.status.success());
    let (ti, oi) = (dir.path("t.img"), dir.path("o.img"));
    sparse_copy(&base, &ti);
    sparse_copy(&base, &oi);
    let (rt, _) = tune_at(Command::new("tune2fs").args(["-L", "x"]), &ti);
    let (ro, out) = tune_at(ours_tune().args(["-L", "x"]), &oi);
    assert_eq!((rt, ro), (0, 0), "{out}");
    assert!(out.contains("Recovering journal."), "{out}");
    let mask = |s: String| {
        s.lines()
            .filter(|l| !l.starts_with("Lifetime writes"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let opt: &[&str] = &["-L", "x"];
    assert_eq!(mask(dumpe2fs_h(&oi, opt)), mask(dumpe2fs_h(&ti, opt)));
    let (n, first) = image_diffs(&ti, &oi, 4).expect("compare");
    assert_eq!(n, 0, "bytes differ at {first:?}");
    let (fc, fout) = e2fsck_fn(&oi);
    assert_eq!(fc, 0, "{fout}");
}

/// Superblock fields change on a mounted filesystem through its device, as
/// tune2fs allows, and survive the kernel's own superblock writes; feature
/// changes and the image file behind the loop device are refused.
#[test]
fn tune_on_a_mounted_device() {
    if !is_root() || !have("losetup") || !have("dumpe2fs") {
        println!("skipped: needs root, losetup and dumpe2fs");
        return;
    }
    let dir = TempDir::new("tune-mounted");
    let img = dir.path("m.img");
    let t = run(Command::new("truncate").args(["-s", "64M"]).arg(&img));
    assert!(t.status.success());
    let o = run(Command::new("mke2fs")
        .args(["-q", "-F", "-t", "ext4"])
        .arg(&img));
    assert!(o.status.success());
    let mnt = dir.path("mnt");
    let mut lm = LoopMount::new(&img, &mnt).unwrap();
    std::fs::write(mnt.join("before"), b"1").unwrap();
    let dev = Path::new(&lm.dev).to_path_buf();
    let (rc, out) = tune_at(
        ours_tune().args(["-L", "mounted", "-c", "25", "-e", "remount-ro"]),
        &dev,
    );
    assert_eq!(rc, 0, "{out}");
    let (rc, out) = tune_at(ours_tune().args(["-O", "^has_journal"]), &dev);
    assert_eq!(rc, 1, "a feature change must wait for the unmount: {out}");
    let (rc, out) = tune_at(ours_tune().args(["-L", "via-image"]), &img);
    assert_eq!(
        rc, 1,
        "the image behind the loop device is not the kernel's: {out}"
    );
    // The kernel writes its superblock again (a file created, then unmount).
    std::fs::write(mnt.join("after"), b"2").unwrap();
    lm.umount().unwrap();
    drop(lm);
    let d = String::from_utf8_lossy(&run(Command::new("dumpe2fs").arg("-h").arg(&img)).stdout)
        .into_owned();
    for want in [
        "Filesystem volume name:   mounted",
        "Maximum mount count:      25",
        "Errors behavior:          Remount read-only",
    ] {
        assert!(d.contains(want), "{want} missing after the unmount:\n{d}");
    }
    assert_eq!(e2fsck_fn(&img).0, 0);
}
