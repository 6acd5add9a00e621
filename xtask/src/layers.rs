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
//! Outside the format crate and the checker, on-disk records are read and
//! written through the format crate's views: a literal byte range
//! (`[12..16]`), `from_le_bytes(`, `to_le_bytes(`, `to_be_bytes(`,
//! `from_be_bytes(` or a `put16(b, off, v)`-style helper fails the check
//! unless the file is in [`BYTE_OFFSET_FILES`] with its reason.
//!
//! It also keeps `unsafe` where it is listed: only the modules in
//! [`UNSAFE_MODULES`] may use it (each block or function with a `SAFETY:`
//! comment just above it), their crates `deny(unsafe_code)` and allow it in
//! those modules alone, and every other product crate `forbid`s it.
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

/// `(path, why)`: product files outside the format crate (and the checker,
/// until its own redesign) that may read or write bytes at literal offsets
/// (`from_le_bytes(`, `[N..M]`) or encode numbers by hand (`to_le_bytes(`,
/// `to_be_bytes(`, `from_be_bytes(`, a `put16(b, off, v)` helper): each
/// says why it is not an ext4 or jbd2 record, which goes through the
/// format crate's views, or why it stays for now.
const BYTE_OFFSET_FILES: &[(&str, &str)] = &[
    (
        "crates/ext4r/src/populate/tar_read.rs",
        "tar headers (POSIX ustar and GNU), the input of mkfs -d",
    ),
    (
        "crates/ext4r-cli/src/mkfs/fit.rs",
        "a tar header's size field, to size an image for a tar",
    ),
    (
        "crates/ext4r/src/tune/new_uuid.rs",
        "the fields of an RFC 4122 time-based UUID, as tune2fs makes one",
    ),
    (
        "crates/ext4r-txn/src/bitmap.rs",
        "bitmap bytes taken eight at a time as words to scan and set",
    ),
    (
        "crates/ext4r-txn/src/mmp.rs",
        "random bytes from /dev/urandom as an MMP sequence number",
    ),
];

/// `(path, why)`: the product modules that may use `unsafe`, and for what.
/// The README's "Where `unsafe` is" lists the same.
const UNSAFE_MODULES: &[(&str, &str)] = &[
    (
        "crates/ext4r-cli/src/main.rs",
        "restores SIGPIPE's default action before any thread exists",
    ),
    (
        "crates/ext4r-cli/src/fsck/cancel.rs",
        "installs the SIGINT/SIGTERM handler that sets fsck's cancel flag",
    ),
    (
        "crates/ext4r-defrag/src/sys.rs",
        "the kernel's defrag interface: EXT4_IOC_MOVE_EXT, FS_IOC_FIEMAP, \
         FS_IOC_GETFSMAP, leases and locks, sync_file_range, SIGIO",
    ),
    (
        "crates/ext4r-fsck/src/crc_lanes.rs",
        "enters the SSE 4.2 three-lane CRC32C after asking the CPU for it",
    ),
    (
        "crates/ext4r-txn/src/device/file.rs",
        "block-device ioctls: BLKROGET, BLKGETSIZE64, BLKDISCARD, BLKZEROOUT",
    ),
    (
        "crates/ext4r/src/resize/online.rs",
        "EXT4_IOC_RESIZE_FS, the kernel's online grow",
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
    found.extend(unsafe_outside_its_modules(&root, &files)?);
    found.extend(byte_offsets_outside_the_format(&root, &files)?);
    println!("layers: unsafe allowed in {} modules", UNSAFE_MODULES.len());
    for (path, why) in BYTE_OFFSET_FILES {
        println!("  byte offsets: {path}: {why}");
    }
    if found.is_empty() {
        println!("layers: no device write or checksum outside the write layer, no unlisted unsafe");
        return Ok(());
    }
    for f in &found {
        println!("  bypass: {f}");
    }
    bail!(
        "{} layer breaches: writes and checksums go through a Transaction and the checksum \
         dispatcher (crates/ext4r-txn), `unsafe` stays in the modules listed in \
         xtask/src/layers.rs with a SAFETY comment; or list a deliberate exception there",
        found.len()
    )
}

/// `unsafe` in a module not listed in [`UNSAFE_MODULES`], a listed use
/// without its `SAFETY:` comment, and crate roots whose `unsafe_code` lint
/// does not match the list (`forbid` without listed modules, else `deny`).
fn unsafe_outside_its_modules(root: &Path, files: &[PathBuf]) -> Result<Vec<String>> {
    let mut found = Vec::new();
    for f in files {
        let rel = relative(root, f);
        let text = std::fs::read_to_string(f)?;
        let listed = UNSAFE_MODULES.iter().any(|(p, _)| *p == rel);
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if !uses_unsafe(line) {
                continue;
            }
            if !listed {
                found.push(format!(
                    "{rel}:{}: unsafe outside the listed modules",
                    i + 1
                ));
            } else if !has_safety_comment(&lines, i) {
                found.push(format!("{rel}:{}: unsafe without a SAFETY comment", i + 1));
            }
        }
    }
    let crates = std::fs::read_dir(root.join("crates"))?;
    for krate in crates {
        let dir = krate?.path();
        let name = dir
            .strip_prefix(root)
            .unwrap_or(&dir)
            .to_string_lossy()
            .into_owned();
        let has_listed = UNSAFE_MODULES
            .iter()
            .any(|(p, _)| p.starts_with(&format!("{name}/")));
        let want = if has_listed {
            "#![deny(unsafe_code)]"
        } else {
            "#![forbid(unsafe_code)]"
        };
        for crate_root in ["src/lib.rs", "src/main.rs"] {
            let Ok(text) = std::fs::read_to_string(dir.join(crate_root)) else {
                continue;
            };
            if !text.lines().any(|l| l.trim() == want) {
                found.push(format!(
                    "{name}/{crate_root}: the crate root lacks `{want}`"
                ));
            }
        }
    }
    Ok(found)
}

/// Reads and writes at literal byte offsets outside the format crate and
/// the checker, in files not listed in [`BYTE_OFFSET_FILES`].
fn byte_offsets_outside_the_format(root: &Path, files: &[PathBuf]) -> Result<Vec<String>> {
    let mut found = Vec::new();
    for f in files {
        let rel = relative(root, f);
        if rel.starts_with("crates/ext4r-format/")
            || rel.starts_with("crates/ext4r-fsck/")
            || BYTE_OFFSET_FILES.iter().any(|(p, _)| *p == rel)
        {
            continue;
        }
        let text = std::fs::read_to_string(f)?;
        for (n, line) in product_lines(&text) {
            let code = line.split("//").next().unwrap_or("");
            if code.contains("from_le_bytes(") || has_literal_range(code) || writes_by_offset(code)
            {
                found.push(format!(
                    "{rel}:{n}: a record read or written at a byte offset (use the format crate's views): {}",
                    line.trim()
                ));
            }
        }
    }
    Ok(found)
}

/// Whether `code` encodes or decodes a number's bytes by hand
/// (`to_le_bytes(`, `to_be_bytes(`, `from_be_bytes(`) or calls a
/// `put16(b, off, v)`-style helper that stores at a byte offset: the write
/// side of what [`has_literal_range`] and `from_le_bytes(` catch.
fn writes_by_offset(code: &str) -> bool {
    const BYTES: &[&str] = &["to_le_bytes(", "to_be_bytes(", "from_be_bytes("];
    if BYTES.iter().any(|p| code.contains(p)) {
        return true;
    }
    ["put8(", "put16(", "put32(", "put48(", "put64("]
        .iter()
        .any(|p| {
            code.match_indices(p).any(|(at, _)| {
                !code[..at]
                    .chars()
                    .next_back()
                    .is_some_and(|c| c.is_alphanumeric() || c == '_')
            })
        })
}

/// Whether `code` indexes with a literal range, `[12..16]` or `[0..=3]`.
fn has_literal_range(code: &str) -> bool {
    code.split('[').skip(1).any(|rest| {
        let Some(inner) = rest.split(']').next() else {
            return false;
        };
        let inner: String = inner.chars().filter(|c| !c.is_whitespace()).collect();
        let Some((a, b)) = inner.split_once("..") else {
            return false;
        };
        let b = b.strip_prefix('=').unwrap_or(b);
        !a.is_empty()
            && !b.is_empty()
            && a.chars().all(|c| c.is_ascii_digit())
            && b.chars().all(|c| c.is_ascii_digit())
    })
}

/// `f`'s path from the repository root, as the lists above spell it.
fn relative(root: &Path, f: &Path) -> String {
    f.strip_prefix(root)
        .unwrap_or(f)
        .to_string_lossy()
        .into_owned()
}

/// A line of code (not a comment, not the lint's own name) using `unsafe`.
fn uses_unsafe(line: &str) -> bool {
    let code = line.split("//").next().unwrap_or("");
    let code = code.replace("unsafe_code", "");
    code.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .any(|w| w == "unsafe")
}

/// Whether the comment block right above line `i` (or the line itself)
/// holds a `SAFETY:` note, or a doc `# Safety` section for an `unsafe fn`.
fn has_safety_comment(lines: &[&str], i: usize) -> bool {
    if lines[i].contains("SAFETY:") {
        return true;
    }
    lines[..i]
        .iter()
        .rev()
        .map(|l| l.trim())
        .take_while(|l| l.starts_with("//") || l.starts_with("#["))
        .any(|l| l.contains("SAFETY:") || l.contains("# Safety"))
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
    fn literal_ranges_are_found() {
        assert!(has_literal_range("b[4..8].copy_from_slice(x)"));
        assert!(has_literal_range("&h[ 124 ..= 135 ]"));
        assert!(!has_literal_range("b[at..at + 4]"));
        assert!(!has_literal_range("b[..4]"));
        assert!(!has_literal_range("v[3]"));
    }

    #[test]
    fn writes_by_offset_are_found() {
        assert!(writes_by_offset(
            "b[off..off + 4].copy_from_slice(&v.to_le_bytes());"
        ));
        assert!(writes_by_offset("let m = JBD2_MAGIC.to_be_bytes();"));
        assert!(writes_by_offset("u32::from_be_bytes(x)"));
        assert!(writes_by_offset("    put16(&mut self.bytes, 0x1A, n);"));
        assert!(writes_by_offset(
            "fn put32(b: &mut [u8], off: usize, v: u32) {"
        ));
        assert!(!writes_by_offset("let o = output(x); input32(y);"));
        assert!(!writes_by_offset("blockmap::set_word(&mut buf, i, v);"));
        assert!(!writes_by_offset("h.eh_entries.set(1);"));
    }

    #[test]
    fn unsafe_needs_its_comment() {
        assert!(uses_unsafe("    let r = unsafe { f() };"));
        assert!(!uses_unsafe("#![deny(unsafe_code)]"));
        assert!(!uses_unsafe("    // no unsafe here"));
        let ok = [
            "    // SAFETY: f has no preconditions.",
            "    let r = unsafe { f() };",
        ];
        assert!(has_safety_comment(&ok, 1));
        let bare = ["    let x = 1;", "    let r = unsafe { f() };"];
        assert!(!has_safety_comment(&bare, 1));
    }

    #[test]
    fn test_modules_are_left_out() {
        let text = "a.write_at(x)\n#[cfg(test)]\nmod tests {\n b.write_at(y)\n}\n";
        let lines: Vec<_> = product_lines(text).collect();
        assert_eq!(lines.len(), 2);
        assert!(lines[0].1.contains("a.write_at"));
    }
}
