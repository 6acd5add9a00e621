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

use std::path::{Path, PathBuf};
use std::time::Instant;

use common::{sparse_from_image, walk_input};

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

/// Every input that once crashed, hung or exhausted memory now walks to the
/// end (errors are fine), in well under libFuzzer's 10 s timeout.
#[test]
fn crash_inputs_walk_without_panic() {
    let files = files_in(&manifest_dir().join("tests/data/fs_walk"));
    for f in &files {
        let data = std::fs::read(f).expect("read input");
        let start = Instant::now();
        let stats = walk_input(&data);
        println!(
            "{}: {:?} in {:?}",
            f.display(),
            stats.map(|s| (s.inodes, s.errors.len())),
            start.elapsed()
        );
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
    let corpus = manifest_dir().join("../../../shared/corpus/e2fsprogs");
    if !corpus.is_dir() {
        println!("skipped: no e2fsprogs corpus at {}", corpus.display());
        return;
    }
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
