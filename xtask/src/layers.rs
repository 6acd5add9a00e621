//! `cargo xtask layers`: every change to a filesystem goes through the
//! write layer (`crates/ext4r-txn`); this check makes a bypass fail CI.
//!
//! It reads the product code (each crate's `src/`, test modules and
//! `tests/` left out) and reports:
//!
//! - a device write (`.write_at(`, `.zeroout(`, `.discard(`) outside the
//!   write layer;
//! - a metadata checksum computed for writing (the format crate's `set_*`
//!   checksum functions, `update_checksum`, bitmap checksums, raw
//!   `crc32c`) anywhere but the format crate, which defines them, and the
//!   write layer's dispatcher (`crates/ext4r-txn/src/csum.rs`).
//!
//! A deliberate exception is listed in [`EXCEPTIONS`] with its reason.
//!
//! The verification lab (`lab/`, crate `ext4r-lab`) is not product code and
//! is not read: it writes damage into images and stamps checksums on purpose.

use anyhow::{bail, Result};
use std::path::{Path, PathBuf};

/// Device writes.
const WRITES: &[&str] = &[".write_at(", ".zeroout(", ".discard("];

/// Checksum stamping.
const STAMPS: &[&str] = &[
    "set_inode_checksum",
    "set_dir_block_checksum",
    "set_extent_block_checksum",
    "set_xattr_block_checksum",
    "set_dx_checksum",
    "set_orphan_block_checksum",
    "set_commit_block_checksum",
    "set_block_tail_checksum",
    "set_block_bitmap_csum",
    "set_inode_bitmap_csum",
    "bitmap_checksum(",
    ".update_checksum(",
    "crc32c(",
];

/// `(path suffix, pattern, why)`: uses that are not a bypass.
const EXCEPTIONS: &[(&str, &str, &str)] = &[
    (
        "crates/ext4r-cli/src/extract.rs",
        ".write_at(",
        "writes extracted files to the host filesystem, not to a device",
    ),
    (
        "crates/ext4r-fsck/src/crc_lanes.rs",
        "crc32c(",
        "verifies the inode checksums pass 1 reads, three records at a time; \
         nothing computed there is written",
    ),
];

/// Where each rule does not apply: the layer itself, and for checksums the
/// format crate that defines them.
fn exempt(path: &Path, stamp: bool) -> bool {
    let p = path.to_string_lossy();
    if stamp {
        p.contains("crates/ext4r-format/") || p.ends_with("crates/ext4r-txn/src/csum.rs")
    } else {
        p.contains("crates/ext4r-txn/")
    }
}

pub fn run() -> Result<()> {
    let root = ext4r_lab::util::repo_root();
    let mut files = Vec::new();
    for krate in std::fs::read_dir(root.join("crates"))? {
        let src = krate?.path().join("src");
        collect(&src, &mut files)?;
    }
    files.sort();
    let mut found = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f)?;
        let rel = f.strip_prefix(&root).unwrap_or(f);
        for (n, line) in product_lines(&text) {
            let code = line.split("//").next().unwrap_or("");
            for (rules, stamp) in [(WRITES, false), (STAMPS, true)] {
                for pat in rules.iter().filter(|p| code.contains(**p)) {
                    if exempt(rel, stamp) {
                        continue;
                    }
                    let allowed = EXCEPTIONS
                        .iter()
                        .any(|(s, p, _)| rel.to_string_lossy().ends_with(s) && p == pat);
                    if !allowed {
                        found.push(format!("{}:{}: {}", rel.display(), n, line.trim()));
                    }
                }
            }
        }
    }
    println!(
        "layers: {} product files read, {} exceptions listed",
        files.len(),
        EXCEPTIONS.len()
    );
    for (path, pat, why) in EXCEPTIONS {
        println!("  exception: {path} {pat}: {why}");
    }
    if found.is_empty() {
        println!("layers: no device write or checksum outside the write layer");
        return Ok(());
    }
    for f in &found {
        println!("  bypass: {f}");
    }
    bail!(
        "{} writes or checksums outside crates/ext4r-txn: go through a Transaction and the \
         checksum dispatcher, or list a deliberate exception in xtask/src/layers.rs",
        found.len()
    )
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    if !dir.is_dir() {
        return Ok(());
    }
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        if p.is_dir() {
            collect(&p, out)?;
        } else if p.extension().is_some_and(|x| x == "rs") && !is_test_file(&p) {
            out.push(p);
        }
    }
    Ok(())
}

/// Files that are test code by name (`tests.rs`, `testutil.rs`,
/// `testlog.rs`, `samples.rs` of test vectors).
fn is_test_file(p: &Path) -> bool {
    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
    matches!(
        name,
        "tests.rs" | "testutil.rs" | "testlog.rs" | "samples.rs"
    )
}

/// The lines before a file's `#[cfg(test)]` module, numbered from 1.
fn product_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut in_tests = false;
    let mut prev_cfg_test = false;
    text.lines().enumerate().filter_map(move |(i, l)| {
        let t = l.trim();
        if prev_cfg_test && t.starts_with("mod ") {
            in_tests = true;
        }
        prev_cfg_test = t == "#[cfg(test)]";
        (!in_tests && !t.starts_with("//")).then_some((i + 1, l))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_modules_are_left_out() {
        let text = "a.write_at(x)\n#[cfg(test)]\nmod tests {\n b.write_at(y)\n}\n";
        let lines: Vec<_> = product_lines(text).collect();
        assert_eq!(lines.len(), 2);
        assert!(lines[0].1.contains("a.write_at"));
    }
}
