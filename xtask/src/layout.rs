//! The order of functions in the shipped binary.
//!
//! Most of a short run's resident memory is the binary's text: the kernel
//! maps a file page that is faulted in together with its cached neighbours
//! (fault-around, 64 KiB), and the functions one run uses are spread over
//! the 4.5 MiB of `.text` in the order the compiler emitted them, so that
//! `mkfs.ext4r` on 1 GiB had 2.8 MiB of text resident for about 420 KiB of
//! functions run. `xtask/hot-symbols.txt` lists the functions the tools run
//! (mkfs, `mkfs -d`, fsck `-n` and `-y`, tune, e4defrag, `--version`; how
//! it was made is written at its top); the static link places them first
//! with lld's `--symbol-ordering-file` (rustc's default linker on x86_64
//! Linux since 1.90; every function is in a section of its own). Measured
//! peak RSS (KiB) before -> after, e2fsprogs': `--version` 1916 -> 880
//! (2350), `mkfs.ext4r` on 1 GiB 3516 -> 1620 (2750), `mkfs -d` of 100,000
//! files 4900 -> 2864 (2728), `fsck -fn` of 2,000,000 files 9600 -> 7684
//! (5608).
//!
//! The names are rustc's mangled ones, which hold a hash, and ThinLTO adds
//! a `.llvm.<digits>` suffix that changes whenever the crate does; a name
//! whose hash or suffix changed is found again by the name without them.
//! Functions no longer found are left where they fall: nothing but memory
//! depends on this order.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use ext4r_lab::util;

/// The committed list of functions run, in order.
const HOT: &str = include_str!("../hot-symbols.txt");

/// Where the current ordering file's path is kept, so that a build with
/// nothing changed passes the same flags and cargo has nothing to do.
fn pointer(dir: &Path) -> PathBuf {
    dir.join("symbol-order.current")
}

/// The linker flags of the ordering file the last build used, when it is
/// still there.
pub fn current_flags(dir: &Path) -> Vec<String> {
    match std::fs::read_to_string(pointer(dir)) {
        Ok(p) if Path::new(p.trim()).is_file() => flags(Path::new(p.trim())),
        _ => Vec::new(),
    }
}

fn flags(file: &Path) -> Vec<String> {
    vec![
        "-C".into(),
        format!("link-arg=-Wl,--symbol-ordering-file={}", file.display()),
        "-C".into(),
        "link-arg=-Wl,--no-warn-symbol-ordering".into(),
    ]
}

/// Forgets the ordering (after a link that could not use it).
pub fn forget(dir: &Path) {
    let _ = std::fs::remove_file(pointer(dir));
}

/// The ordering file for `bin`'s symbols: when it differs from the one
/// the last build used, writes it (named by its contents, so that the new
/// flags make cargo link again) and returns its flags; `None` when the
/// build already used it, or when the symbols cannot be listed (no `nm`).
pub fn new_flags(dir: &Path, bin: &Path) -> Result<Option<Vec<String>>> {
    let Some(symbols) = symbols(bin)? else {
        println!(
            "note: nm not found; the functions of {} keep the compiler's order",
            bin.display()
        );
        return Ok(None);
    };
    let text = order(&symbols);
    let file = dir.join(format!("symbol-order-{:016x}.txt", fnv(text.as_bytes())));
    let used = std::fs::read_to_string(pointer(dir)).unwrap_or_default();
    if used.trim() == file.to_string_lossy() && file.is_file() {
        return Ok(None);
    }
    std::fs::write(&file, text).with_context(|| format!("write {}", file.display()))?;
    std::fs::write(pointer(dir), file.to_string_lossy().as_bytes())
        .with_context(|| format!("write {}", pointer(dir).display()))?;
    Ok(Some(flags(&file)))
}

/// The names of `bin`'s defined functions (`nm`), or `None` without `nm`.
fn symbols(bin: &Path) -> Result<Option<Vec<String>>> {
    if util::find_program("nm".as_ref()).is_none() {
        return Ok(None);
    }
    let out = Command::new("nm")
        .args(["--defined-only", "--format=posix"])
        .arg(bin)
        .output()
        .context("run nm")?;
    if !out.status.success() {
        bail!("nm {} failed", bin.display());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(Some(
        text.lines()
            .filter_map(|l| {
                let mut f = l.split(' ');
                let name = f.next()?;
                let kind = f.next()?;
                matches!(kind, "t" | "T" | "w" | "W" | "i").then(|| name.to_string())
            })
            .collect(),
    ))
}

/// A name without what changes from one build to the next: the
/// `.llvm.<digits>` suffix of a function ThinLTO made global, and the
/// trailing hash of a legacy-mangled name (`…17h<16 hex>E`). `None` when
/// it has neither.
fn unhashed(name: &str) -> Option<&str> {
    let base = match name.find(".llvm.") {
        Some(i) if name[i + 6..].bytes().all(|b| b.is_ascii_digit()) => &name[..i],
        _ => name,
    };
    let n = base.len();
    let legacy = n
        .checked_sub(20)
        .and_then(|s| base.get(s..))
        .is_some_and(|t| {
            t.starts_with("17h")
                && t.ends_with('E')
                && t[3..19].bytes().all(|b| b.is_ascii_hexdigit())
        });
    let stem = if legacy { &base[..n - 20] } else { base };
    (stem.len() < name.len()).then_some(stem)
}

/// The ordering file's text: each listed function found in `symbols`, by
/// its name or else by its name without the hash (every function that
/// name has now, as long as they are few: a generic's instances, whose
/// hashes change when the crates instantiating them do).
fn order(symbols: &[String]) -> String {
    let present: std::collections::HashSet<&str> = symbols.iter().map(String::as_str).collect();
    let mut by_stem: HashMap<&str, Vec<&str>> = HashMap::new();
    for s in symbols {
        if let Some(stem) = unhashed(s) {
            by_stem.entry(stem).or_default().push(s);
        }
    }
    let mut out = String::new();
    let mut seen = std::collections::HashSet::new();
    for name in HOT.lines().filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let found: Vec<&str> = if present.contains(name) {
            vec![name]
        } else {
            match unhashed(name).and_then(|s| by_stem.get(s)) {
                Some(v) if v.len() <= 32 => v.clone(),
                _ => Vec::new(),
            }
        };
        for f in found {
            if seen.insert(f) {
                out.push_str(f);
                out.push('\n');
            }
        }
    }
    out
}

/// FNV-1a: a name for the file's contents.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_are_stripped_from_legacy_names_only() {
        assert_eq!(
            unhashed("_ZN5ext4r4mkfs3run17h0123456789abcdefE"),
            Some("_ZN5ext4r4mkfs3run")
        );
        assert_eq!(unhashed("_ZN5ext4r4mkfs3run17hXYZ3456789abcdefE"), None);
        assert_eq!(unhashed("__memcpy_avx_unaligned_erms"), None);
        assert_eq!(unhashed("main"), None);
        assert_eq!(
            unhashed("_ZN5ext4r4mkfs3run17h0123456789abcdefE.llvm.12345"),
            Some("_ZN5ext4r4mkfs3run")
        );
        assert_eq!(
            unhashed("_RNvNtCs1_3std3env4__var.llvm.987"),
            Some("_RNvNtCs1_3std3env4__var")
        );
    }

    #[test]
    fn a_changed_hash_still_finds_the_function() {
        let first = HOT
            .lines()
            .find(|l| unhashed(l).is_some())
            .expect("a legacy name in the list");
        let moved = format!(
            "{}17hffffffffffffffffE",
            unhashed(first).unwrap_or_default()
        );
        let text = order(&[moved.clone(), "unrelated".into()]);
        assert_eq!(text, format!("{moved}\n"));
    }
}
