//! `cargo xtask dist`: the `ext4r` binary as it is shipped. The lab's
//! benchmarks measure this binary; they ask for it with `cargo xtask dist`.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Result};
use ext4r_lab::util;

use crate::layout;

/// Builds `ext4r` as it is shipped and returns its path: on glibc Linux
/// statically linked (`-C target-feature=+crt-static`, a static PIE), which
/// spares every run the dynamic loader and the relocation of libc, libm and
/// libgcc_s: about 1 MiB less resident memory, which is most of a short
/// tool's peak (mkfs.ext4r on 1 TiB: 3.9 -> 2.6 MiB). Its relative
/// relocations are packed (`-z pack-relative-relocs`, DT_RELR, which the
/// static start code of glibc 2.36 applies): a 180 KiB `.rela.dyn` that
/// every run read in full shrinks to 2 KiB (peak RSS of `ext4r --version`
/// 2112 -> 1916 KiB, of `mkfs.ext4r` on 1 GiB 3772 -> 3516 KiB), while
/// the binary stays position-independent (a non-PIE static link saves
/// only 60 KiB more and loses address randomisation). The flags are given
/// to the final link only (`cargo rustc`), since proc-macro crates cannot
/// be built with them, in a target directory of its own so that it does
/// not invalidate `target/release`. Elsewhere: the plain release build.
pub fn dist_ext4r() -> Result<PathBuf> {
    if !cfg!(all(target_os = "linux", target_env = "gnu")) {
        let v = util::release_ext4r("")?;
        return Ok(PathBuf::from(&v[0]));
    }
    let dir = util::target_dir().join("dist");
    let bin = dir.join("release").join("ext4r");
    // The static start code applies DT_RELR from glibc 2.36 on; an older
    // one would start with its pointers unrelocated.
    let relr: &[&str] = if glibc_at_least(2, 36) {
        &["-C", "link-arg=-Wl,-z,pack-relative-relocs"]
    } else {
        &[]
    };
    let build = |what: &str, order: &[String]| {
        util::run_step(
            what,
            util::cargo()
                .args(["rustc", "--release", "-p", "ext4r-cli", "--bin", "ext4r"])
                .arg("--target-dir")
                .arg(&dir)
                .args(["--", "-C", "target-feature=+crt-static"])
                .args(relr)
                .args(order),
        )
    };
    let order = layout::current_flags(&dir);
    if let Err(e) = build("build ext4r (release, static)", &order) {
        if order.is_empty() {
            return Err(e);
        }
        layout::forget(&dir);
        build("build ext4r (release, static, compiler's order)", &[])?;
    }
    if !bin.is_file() {
        bail!("{} was not built", bin.display());
    }
    // The functions the tools run first and together (see layout.rs); a
    // linker without --symbol-ordering-file (lld's) keeps the plain link.
    if let Some(order) = layout::new_flags(&dir, &bin)? {
        if build("link ext4r (hot functions first)", &order).is_err() {
            println!("note: the linker cannot order functions; kept the compiler's order");
            layout::forget(&dir);
            build("build ext4r (release, static, compiler's order)", &[])?;
        }
    }
    let runs = |b: &Path| {
        Command::new(b)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !runs(&bin) {
        println!("note: the ordered static binary does not run; linked it in the compiler's order");
        layout::forget(&dir);
        build("build ext4r (release, static, compiler's order)", &[])?;
        if !runs(&bin) {
            bail!("{} does not run", bin.display());
        }
    }
    Ok(bin)
}

/// Whether the C library is glibc `major.minor` or later (`getconf
/// GNU_LIBC_VERSION`: "glibc 2.36").
fn glibc_at_least(major: u32, minor: u32) -> bool {
    let Ok(out) = Command::new("getconf").arg("GNU_LIBC_VERSION").output() else {
        return false;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let mut v = text
        .trim()
        .trim_start_matches("glibc ")
        .split('.')
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let (a, b) = (v.next().unwrap_or(0), v.next().unwrap_or(0));
    (a, b) >= (major, minor)
}
