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

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use ext4r_lab::util;

/// The committed list of functions run, in order.
const HOT: &str = include_str!("../hot-symbols.txt");

/// Where the current ordering file's path is kept, so that a build with
/// nothing changed passes the same file and cargo has nothing to do.
fn pointer(dir: &Path) -> PathBuf {
    dir.join("symbol-order.current")
}

/// The ordering file the last build used, when it is still there.
pub fn current_file(dir: &Path) -> Option<PathBuf> {
    match std::fs::read_to_string(pointer(dir)) {
        Ok(p) if Path::new(p.trim()).is_file() => Some(PathBuf::from(p.trim())),
        _ => None,
    }
}

/// Forgets the ordering (after a link that could not use it).
pub fn forget(dir: &Path) {
    let _ = std::fs::remove_file(pointer(dir));
}

/// The ordering file for `bin`'s symbols: when it differs from the one
/// the last build used, writes it (named by its contents) and returns its
/// path; `None` when the build already used it, or when the symbols
/// cannot be listed (no `nm`).
pub fn new_file(dir: &Path, bin: &Path) -> Result<Option<PathBuf>> {
    let Some(symbols) = symbols(bin)? else {
        println!(
            "note: nm not found; the functions of {} keep the list's names as they are",
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
    Ok(Some(file))
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
    let base = without_suffix(name);
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
    order_of(HOT, symbols, None)
}

/// `order` for the list `list`. With `ran` (the functions a trace saw
/// run), a name found only by its stem keeps just the instances that ran,
/// or the one instance the stem has.
fn order_of(list: &str, symbols: &[String], ran: Option<&HashSet<String>>) -> String {
    let present: HashSet<&str> = symbols.iter().map(String::as_str).collect();
    let mut by_stem: HashMap<&str, Vec<&str>> = HashMap::new();
    let mut by_base: HashMap<&str, Vec<&str>> = HashMap::new();
    for s in symbols {
        if let Some(stem) = unhashed(s) {
            by_stem.entry(stem).or_default().push(s);
        }
        by_base.entry(without_suffix(s)).or_default().push(s);
    }
    let mut out = String::new();
    let mut seen = HashSet::new();
    for name in names(list) {
        // The name; else the same function with another ThinLTO suffix
        // (it differs between target directories); else by its stem.
        let found: Vec<&str> = if present.contains(name) {
            vec![name]
        } else if let Some(v) = by_base.get(without_suffix(name)) {
            v.clone()
        } else {
            match (unhashed(name).and_then(|s| by_stem.get(s)), ran) {
                (Some(v), Some(ran)) if v.len() > 1 => {
                    v.iter().copied().filter(|f| ran.contains(*f)).collect()
                }
                (Some(v), _) if v.len() <= 32 => v.clone(),
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

/// A name without the `.llvm.<digits>` suffix ThinLTO gives a function it
/// made global.
fn without_suffix(name: &str) -> &str {
    match name.find(".llvm.") {
        Some(i) if name[i + 6..].bytes().all(|b| b.is_ascii_digit()) => &name[..i],
        _ => name,
    }
}

/// The names of a list: its lines but comments and blank ones.
fn names(list: &str) -> impl Iterator<Item = &str> {
    list.lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
}

/// A name rustc mangled (Rust's v0 or the legacy scheme), whose hash can
/// change from one build to the next; the C library's names cannot.
fn is_rust(name: &str) -> bool {
    name.starts_with("_R") || name.starts_with("_ZN")
}

#[derive(clap::Args)]
pub struct HotArgs {
    /// Only count the listed Rust functions that are in the binary, and fail
    /// when fewer than --min percent are (CI runs this).
    #[arg(long)]
    check: bool,
    /// The least share of the listed Rust functions, in percent, that
    /// --check accepts.
    #[arg(long, default_value_t = 80)]
    min: usize,
    /// The binary to read [default: target/release/ext4r, built first].
    #[arg(long)]
    bin: Option<PathBuf>,
    /// Functions a trace saw run: `valgrind --tool=callgrind
    /// --demangle=no` output files (or lists of names, one a line). A
    /// listed name found only by the name without its hash then keeps the
    /// instances that ran, not every instance of a generic. The trace must
    /// be of a build with the same names (e.g. EXT4R_PLAIN_LINK=1: valgrind
    /// runs it; the names do not depend on the link).
    #[arg(long, value_name = "FILE", num_args = 1..)]
    ran: Vec<PathBuf>,
}

/// `cargo xtask hot-symbols`: the names of `xtask/hot-symbols.txt` matched
/// to the release binary's. A listed function whose name changed (its
/// hash, after an edit of its crate or another toolchain) is written with
/// its name in this build, found by the name without the hash; one no
/// longer found is dropped. The C library's names and the header are kept.
/// What functions the list holds is not remade: that is the recipe in the
/// list's header (valgrind and perf runs over the tools).
pub fn hot_symbols(args: &HotArgs) -> Result<()> {
    let bin = match &args.bin {
        Some(b) => b.clone(),
        None => PathBuf::from(&util::release_ext4r("")?[0]),
    };
    let Some(symbols) = symbols(&bin)? else {
        bail!(
            "nm (binutils) is needed to read the names of {}",
            bin.display()
        );
    };
    let path = util::repo_root().join("xtask").join("hot-symbols.txt");
    let list =
        std::fs::read_to_string(&path).with_context(|| format!("read {}", path.display()))?;
    let present: HashSet<&str> = symbols.iter().map(String::as_str).collect();
    let rust: Vec<&str> = names(&list).filter(|n| is_rust(n)).collect();
    let found = rust.iter().filter(|n| present.contains(*n)).count();
    let percent = found * 100 / rust.len().max(1);
    println!(
        "hot-symbols: {found} of the {} listed Rust functions are in {} ({percent}%)",
        rust.len(),
        bin.display()
    );
    if args.check {
        if percent < args.min {
            bail!(
                "fewer than {}% of the functions of {} are in the release binary: their order \
                 is lost. `cargo xtask hot-symbols` matches the names to this build; when \
                 functions moved or were renamed, remake the list as its header says",
                args.min,
                path.display()
            );
        }
        return Ok(());
    }
    let ran = if args.ran.is_empty() {
        None
    } else {
        let mut set = HashSet::new();
        for f in &args.ran {
            let text =
                std::fs::read_to_string(f).with_context(|| format!("read {}", f.display()))?;
            set.extend(ran_names(&text));
        }
        let listed: HashSet<&str> = names(&list).collect();
        let unlisted = set
            .iter()
            .filter(|n| is_rust(n) && !listed.contains(n.as_str()))
            .count();
        println!(
            "hot-symbols: the trace saw {} functions run, {unlisted} of them not listed \
             (step 3 of the list's recipe places those)",
            set.len()
        );
        Some(set)
    };
    let text = refresh(&list, &symbols, ran.as_ref());
    let kept = names(&text).count();
    std::fs::write(&path, &text).with_context(|| format!("write {}", path.display()))?;
    println!(
        "hot-symbols: wrote {} ({kept} names, {} before)",
        path.display(),
        names(&list).count()
    );
    Ok(())
}

/// The list `list` with its Rust names as `symbols` has them (see
/// `hot_symbols`); its comments and the C library's names unchanged.
fn refresh(list: &str, symbols: &[String], ran: Option<&HashSet<String>>) -> String {
    let mut out = String::new();
    let mut seen = HashSet::new();
    for line in list.lines() {
        if line.is_empty() || line.starts_with('#') || !is_rust(line) {
            if line.is_empty() || line.starts_with('#') || seen.insert(line.to_string()) {
                out.push_str(line);
                out.push('\n');
            }
            continue;
        }
        for name in order_of(line, symbols, ran).lines() {
            if seen.insert(name.to_string()) {
                out.push_str(name);
                out.push('\n');
            }
        }
    }
    out
}

/// The function names of a callgrind output (`fn=(id) name` and
/// `cfn=(id) name` lines; a name is given once, at its id's first use),
/// or of a plain list, one name a line.
fn ran_names(text: &str) -> HashSet<String> {
    let mut out = HashSet::new();
    for line in text.lines() {
        let rest = line
            .strip_prefix("fn=")
            .or_else(|| line.strip_prefix("cfn="));
        let name = match rest {
            Some(r) => match r.strip_prefix('(') {
                Some(r) => r.split_once(") ").map_or("", |(_, n)| n),
                None => r,
            },
            None if line.contains('=') || line.contains(' ') || line.starts_with('#') => "",
            None => line,
        };
        if !name.is_empty() {
            out.insert(name.to_string());
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
    fn refresh_renames_drops_and_keeps() {
        let list = "# header\n_ZN5ext4r4mkfs3run17h0123456789abcdefE\n__memcpy_evex\n\
                    _ZN5ext4r4gone17h0123456789abcdefE\n_RNvCs1_3std4main\n";
        let symbols = [
            "_ZN5ext4r4mkfs3run17hffffffffffffffffE".to_string(),
            "_RNvCs1_3std4main".to_string(),
        ];
        assert_eq!(
            refresh(list, &symbols, None),
            "# header\n_ZN5ext4r4mkfs3run17hffffffffffffffffE\n__memcpy_evex\n\
             _RNvCs1_3std4main\n"
        );
    }

    #[test]
    fn another_thinlto_suffix_finds_that_function_only() {
        let symbols = [
            "_ZN3foo4next17h0123456789abcdefE.llvm.222".to_string(),
            "_ZN3foo4next17hffffffffffffffffE.llvm.222".to_string(),
        ];
        assert_eq!(
            order_of(
                "_ZN3foo4next17h0123456789abcdefE.llvm.111\n",
                &symbols,
                None
            ),
            "_ZN3foo4next17h0123456789abcdefE.llvm.222\n"
        );
    }

    #[test]
    fn a_trace_keeps_the_instances_that_ran() {
        let symbols = [
            "_ZN3foo4next17h1111111111111111E".to_string(),
            "_ZN3foo4next17h2222222222222222E".to_string(),
            "_ZN3foo4next17h3333333333333333E".to_string(),
            "_ZN3bar4once17h4444444444444444E".to_string(),
        ];
        let trace = "events: Ir\nfn=(1) _ZN3foo4next17h2222222222222222E\n0 5\n\
                     cfn=(2) _RNvCs1_3std4main\ncalls=1 0\nfn=(1)\n";
        let ran = ran_names(trace);
        assert_eq!(ran.len(), 2);
        let list = "_ZN3foo4next17h0000000000000000E\n_ZN3bar4once17h0000000000000000E\n";
        assert_eq!(
            order_of(list, &symbols, Some(&ran)),
            "_ZN3foo4next17h2222222222222222E\n_ZN3bar4once17h4444444444444444E\n"
        );
        assert_eq!(order_of(list, &symbols, None).lines().count(), 4);
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
