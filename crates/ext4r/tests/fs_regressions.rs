//! The read path on damaged images: the `fs_walk` fuzz target's walk
//! (tests/common/fs_walk.rs) replayed over every crash input it found
//! (tests/data/fs_walk/, sparse-image inputs), over its pristine seeds
//! (which must walk without a single error), and over the e2fsprogs test
//! images when ../shared/corpus is present. A panic fails the test; a hang
//! shows as a test that does not finish.

#[allow(dead_code)]
mod common {
    include!("common/fs_walk.rs");
}
#[path = "../../../tests/common/corpus.rs"]
mod corpus;

use std::path::{Path, PathBuf};
use std::time::Instant;

use common::{sparse_from_image, walk_input, walk_input_unverified};

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.is_file() && p.file_name().is_some_and(|n| n != ".gitignore"))
        .collect();
    v.sort();
    v
}

/// What each saved input did before its fix, and the error that now stops
/// it (`None`: the filesystem must not open).
const CRASHES: &[(&str, Option<&str>)] = &[
    // Fuzzer: a 64-bit descriptor whose inode table address is near 2^64;
    // adding the offset into the table overflowed.
    ("inode-table-overflow", Some("inode table")),
    // Crafted: 2^31 groups of one block and one inode on a 2 KiB image;
    // the descriptor table was reserved (128 GiB) before being read.
    ("huge-group-count", None),
    // Crafted: a triple-indirect block listing itself 1024 times (4 KiB
    // blocks, i_size 4 TiB): 2^30 leaves, a timeout then out of memory.
    (
        "self-referencing-indirect",
        Some("indirect block reached twice"),
    ),
    // Crafted: 203 xattr block entries naming one 16 MiB EA inode: 3 GiB.
    ("many-ea-inode-values", Some("xattr values")),
    // Made by the kernel: L1..L5 -> "L<n-1>/" x 300 + "..", L0 -> ".";
    // a depth-limited lookup of L5/x followed 300^5 symlinks.
    ("symlink-fan-out", None),
];

/// Every input that once crashed, hung or exhausted memory now walks to the
/// end, stopped by the error that names the damage.
#[test]
fn crash_inputs_walk_without_panic() {
    let dir = manifest_dir().join("tests/data/fs_walk");
    let files = files_in(&dir);
    for f in &files {
        let name = f.file_name().expect("name").to_string_lossy().into_owned();
        let data = std::fs::read(f).expect("read input");
        let start = Instant::now();
        let stats = walk_input(&data);
        println!(
            "{name}: {:?} in {:?}",
            stats
                .as_ref()
                .map(|s| (s.inodes, s.lookup_failures, &s.errors)),
            start.elapsed()
        );
        let Some(&(_, want)) = CRASHES.iter().find(|(n, _)| *n == name) else {
            continue; // a fuzzer input without a recorded expectation
        };
        // The damage each input was saved for lies past its superblock,
        // whose checksum a fuzzer's input may also have broken (then the
        // verifying open refuses it, rightly): the expectation is checked
        // on the salvage reader's walk.
        let stats = walk_input_unverified(&data);
        match (want, stats) {
            (Some(w), Some(s)) => assert!(
                s.errors.iter().any(|e| e.contains(w)),
                "{name}: no error containing {w:?}: {:#?}",
                s.errors
            ),
            (Some(w), None) => panic!("{name}: does not open; expected {w:?} while walking"),
            (None, _) => {}
        }
    }
    for (n, _) in CRASHES {
        assert!(dir.join(n).is_file(), "{n} missing from {}", dir.display());
    }
}

/// The seeds are undamaged images made by mke2fs and the kernel: the walk
/// must read all of them with no error at all, and see what was put there.
#[test]
fn seeds_walk_cleanly() {
    let dir = manifest_dir().join("../../fuzz/corpus/fs_walk");
    let seeds: Vec<PathBuf> = files_in(&dir)
        .into_iter()
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("seed-"))
        })
        .collect();
    assert!(!seeds.is_empty(), "no seeds in {}", dir.display());
    for f in &seeds {
        let data = std::fs::read(f).expect("read seed");
        let stats = walk_input(&data).unwrap_or_else(|| panic!("{}: does not open", f.display()));
        assert!(
            stats.errors.is_empty(),
            "{}: {:#?}",
            f.display(),
            stats.errors
        );
        // root, lost+found, big/ and its file, the files, links, sub/...
        assert!(stats.inodes >= 15, "{}: {stats:?}", f.display());
        assert!(stats.entries >= 40, "{}: {stats:?}", f.display());
        assert!(stats.links >= 5, "{}: {stats:?}", f.display());
        assert!(stats.xattrs >= 3, "{}: {stats:?}", f.display());
    }
}

/// Every e2fsprogs test image (damaged on purpose) walks without a panic,
/// with and without checksum verification.
#[test]
fn e2fsprogs_corpus_walks_without_panic() {
    let Some(corpus) = corpus::corpus_dir() else {
        println!("skipped: no e2fsprogs corpus beside the repository");
        return;
    };
    let mut n = 0;
    for d in files_in_dirs(&corpus) {
        let gz = d.join("image.gz");
        if !gz.is_file() {
            continue;
        }
        let out = match std::process::Command::new("gzip")
            .arg("-dc")
            .arg(&gz)
            .output()
        {
            Ok(o) if o.status.success() => o.stdout,
            Ok(o) => panic!("gzip -dc {}: {}", gz.display(), o.status),
            Err(e) => {
                println!("skipped: cannot run gzip: {e}");
                return;
            }
        };
        for verify in [false, true] {
            let start = Instant::now();
            let stats = walk_input(&sparse_from_image(&out, verify));
            println!(
                "{} (verify {verify}): {:?} in {:?}",
                d.display(),
                stats.map(|s| (s.inodes, s.errors.len())),
                start.elapsed()
            );
        }
        n += 1;
    }
    assert!(n > 100, "only {n} images in {}", corpus.display());
}

fn files_in_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("corpus dir")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.is_dir())
        .collect();
    v.sort();
    v
}

/// A 16 TiB filesystem (mke2fs on a sparse file in /dev/shm, which takes
/// files past the host disk's limit) opens and walks reading only its
/// metadata in use: the 131072 group descriptors (8 MiB) and a few blocks,
/// not anything proportional to the size. Memory follows the bytes read.
#[test]
fn sixteen_tib_sparse_image_opens_with_bounded_reads() {
    use ext4r::device::{FileDevice, OpenMode};
    let shm = Path::new("/dev/shm");
    if !shm.is_dir() {
        println!("skipped: no /dev/shm");
        return;
    }
    struct Remove(PathBuf);
    impl Drop for Remove {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
    let img = Remove(shm.join(format!("ext4r-fs-walk-16t-{}.img", std::process::id())));
    let f = std::fs::File::create(&img.0).expect("create image in /dev/shm");
    f.set_len(16 << 40).expect("16 TiB sparse file");
    drop(f);
    let made = std::process::Command::new("mke2fs")
        .args(["-q", "-F", "-t", "ext4", "-E"])
        .arg("lazy_itable_init=1,lazy_journal_init=1")
        .arg(&img.0)
        .output();
    match made {
        Ok(o) if o.status.success() => {}
        Ok(o) => {
            println!(
                "skipped: mke2fs failed: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            return;
        }
        Err(e) => {
            println!("skipped: cannot run mke2fs: {e}");
            return;
        }
    }
    let start = Instant::now();
    let dev = FileDevice::open(&img.0, OpenMode::default()).expect("open image");
    let fs = ext4r::fs::Filesystem::open(dev).expect("open filesystem");
    let opened = fs.device().stats();
    let stats = common::walk(&fs);
    let total = fs.device().stats();
    println!(
        "16 TiB: {} groups; open read {} bytes in {} calls, walk {} bytes, {:?}",
        fs.group_descs().len(),
        opened.bytes_read,
        opened.read_calls,
        total.bytes_read - opened.bytes_read,
        start.elapsed()
    );
    assert_eq!(fs.group_descs().len(), 131_072);
    assert!(stats.errors.is_empty(), "{:#?}", stats.errors);
    assert!(stats.inodes >= 3, "{stats:?}"); // root, lost+found, journal
    assert!(opened.bytes_read <= 9 << 20, "{opened:?}");
    assert!(total.bytes_read <= 64 << 20, "{total:?}");
}
