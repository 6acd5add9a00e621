//! The link of the `ext4r` binary in a release build on glibc Linux, so
//! that `cargo build --release` makes the binary `cargo xtask dist` ships
//! (issue 33: peak RSS at or below e2fsck's with either).
//!
//! Most of a short run's resident memory is text the kernel maps around
//! each fault (64 KiB), and the shared C library's: on `fsck -fn -m 1` of
//! 300,000 files, 3.6 MiB of our text, 1.3 MiB of libc, 0.3 MiB of libm,
//! 0.2 MiB of ld.so and 0.1 MiB of libgcc_s of an 8.1 MiB peak, where the
//! static binary with its hot functions first peaked at 4.0 MiB. So the
//! binary is linked
//! - statically (a static PIE): rustc's own way, `-C
//!   target-feature=+crt-static`, cannot be given to one crate from cargo
//!   on stable, and given to all it refuses the proc-macros. A build
//!   script can only add linker arguments, after the libraries rustc names
//!   (`-lgcc_s -lm -lc` ...). So the bins get `-static-pie` and, first on
//!   the search path, a directory where each of those names is a linker
//!   script naming the static archive (`libc.so` holding
//!   `GROUP(-l:libc.a ...)`), as the C library's own `libc.so` is a script;
//! - with packed relative relocations (DT_RELR, applied by the static
//!   start code of glibc 2.36 and later);
//! - with the functions of `xtask/hot-symbols.txt` first and together
//!   (lld's `--symbol-ordering-file`; rustc's default linker on x86_64
//!   Linux since 1.90). The names are exact: a name whose hash changed
//!   stays where the compiler put it (`cargo xtask hot-symbols` makes the
//!   list anew, and CI says when too few of its names are in the binary).
//!
//! Each of these is tried on a small program linked the same way and run
//! (when the build is for this machine); what does not link or run is left
//! out, down to the plain link. Debug builds, tests and other targets are
//! untouched. `EXT4R_PLAIN_LINK=1` leaves the link alone;
//! `EXT4R_SYMBOL_ORDER=<file>` orders by that file instead of the list
//! (`cargo xtask dist` passes the list matched to the names of the binary
//! it has just built, a changed hash found again by the name without it).

use std::path::{Path, PathBuf};
use std::process::Command;

const HOT: &str = "../../xtask/hot-symbols.txt";

/// What the static link's shadow directory holds: each shared library
/// rustc links std with, as a script naming its static archive.
const SHADOWS: &[(&str, &str)] = &[
    ("libc.so", "GROUP(-l:libc.a -l:libgcc_eh.a -l:libgcc.a)"),
    ("libgcc_s.so", "INPUT(-l:libgcc_eh.a -l:libgcc.a)"),
    ("libm.so", "INPUT(-l:libm.a)"),
    ("libdl.so", "INPUT(-l:libdl.a)"),
    ("librt.so", "INPUT(-l:librt.a)"),
    ("libpthread.so", "INPUT(-l:libpthread.a)"),
    ("libutil.so", "INPUT(-l:libutil.a)"),
];

/// A program that uses what the tools use of the C library and std
/// (threads, formatting through vtables, the environment), to be run.
const PROBE: &str = r#"
fn main() {
    let n = std::env::args().count();
    let t = std::thread::spawn(move || (0..n + 41).map(|i| i.to_string()).collect::<Vec<_>>());
    let v = t.join().map(|v| v.len()).unwrap_or(0);
    let d: Box<dyn std::fmt::Display> = Box::new(v);
    println!("ext4r-probe {d}");
}
"#;

fn main() {
    println!("cargo::rerun-if-changed={HOT}");
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-env-changed=EXT4R_PLAIN_LINK");
    println!("cargo::rerun-if-env-changed=EXT4R_SYMBOL_ORDER");
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    if var("PROFILE") != "release"
        || var("CARGO_CFG_TARGET_OS") != "linux"
        || var("CARGO_CFG_TARGET_ENV") != "gnu"
        || std::env::var_os("EXT4R_PLAIN_LINK").is_some()
    {
        return;
    }
    let Some(out) = std::env::var_os("OUT_DIR").map(PathBuf::from) else {
        return;
    };
    let given = std::env::var_os("EXT4R_SYMBOL_ORDER").map(PathBuf::from);
    if let Some(g) = &given {
        println!("cargo::rerun-if-changed={}", g.display());
    }
    let order = match given.map_or_else(|| write_order(&out), Ok) {
        Ok(p) => Some(p),
        Err(e) => {
            println!("cargo::warning=ext4r: no function order ({e})");
            None
        }
    };
    let shadow = out.join("static-libs");
    let shadows_ok = std::fs::create_dir_all(&shadow).is_ok()
        && SHADOWS
            .iter()
            .all(|(name, text)| std::fs::write(shadow.join(name), format!("{text}\n")).is_ok());

    let static_args = [
        "-static-pie".to_string(),
        format!("-L{}", shadow.display()),
        "-Wl,-z,pack-relative-relocs".to_string(),
    ];
    let order_args: Vec<String> = order
        .iter()
        .flat_map(|p| {
            [
                format!("-Wl,--symbol-ordering-file={}", p.display()),
                "-Wl,--no-warn-symbol-ordering".to_string(),
            ]
        })
        .collect();
    // Usually all at once; else each part that works, in turn.
    let none: &[String] = &[];
    let (static_link, relr) = if shadows_ok {
        (&static_args[..2], &static_args[2..])
    } else {
        (none, none)
    };
    let parts: Vec<&[String]> = [static_link, relr, &order_args[..]]
        .into_iter()
        .filter(|p| !p.is_empty())
        .collect();
    let mut args: Vec<String> = parts.concat();
    if !args.is_empty() && !probe(&out, 0, &args) {
        args.clear();
        for (i, part) in parts.iter().enumerate() {
            // Packed relocations only with the static link.
            if part[0].contains("pack-relative-relocs") && args.is_empty() {
                continue;
            }
            let with: Vec<String> = [&args[..], part].concat();
            if probe(&out, i + 1, &with) {
                args = with;
            } else {
                let what = match part[0].as_str() {
                    "-static-pie" => "statically",
                    a if a.contains("pack-relative-relocs") => "with packed relocations",
                    _ => "with its hot functions first",
                };
                println!(
                    "cargo::warning=ext4r: the linker here cannot link the release binary \
                     {what}; linked without"
                );
            }
        }
    }
    for a in &args {
        println!("cargo::rustc-link-arg-bins={a}");
    }
}

/// The ordering file: the listed names, comments and blank lines left out.
fn write_order(out: &Path) -> std::io::Result<PathBuf> {
    let text = std::fs::read_to_string(HOT)?;
    let names: String = text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .flat_map(|l| [l, "\n"])
        .collect();
    let path = out.join("symbol-order.txt");
    std::fs::write(&path, names)?;
    Ok(path)
}

/// Whether a small program links with `args` and, when built for this
/// machine, runs and prints what it should.
fn probe(out: &Path, n: usize, args: &[String]) -> bool {
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    let dir = out.join(format!("probe{n}"));
    if std::fs::create_dir_all(&dir).is_err() {
        return false;
    }
    let src = dir.join("probe.rs");
    let bin = dir.join("probe");
    if std::fs::write(&src, PROBE).is_err() {
        return false;
    }
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let mut cmd = Command::new(rustc);
    cmd.arg(&src)
        .arg("-o")
        .arg(&bin)
        .args(["--edition", "2021", "-C", "panic=abort"])
        .args(["--target", &var("TARGET")]);
    let flags = var("CARGO_ENCODED_RUSTFLAGS");
    cmd.args(flags.split('\x1f').filter(|f| !f.is_empty()));
    if let Some(linker) = std::env::var_os("RUSTC_LINKER") {
        let mut a = std::ffi::OsString::from("linker=");
        a.push(linker);
        cmd.arg("-C").arg(a);
    }
    for a in args {
        cmd.arg("-C").arg(format!("link-arg={a}"));
    }
    let linked = cmd
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !linked {
        return false;
    }
    if var("TARGET") != var("HOST") {
        // Not runnable here: a static link is trusted only when it ran.
        return !args.iter().any(|a| a == "-static-pie");
    }
    Command::new(&bin)
        .output()
        .is_ok_and(|o| o.status.success() && o.stdout == b"ext4r-probe 42\n")
}
