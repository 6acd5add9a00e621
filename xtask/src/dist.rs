//! `cargo xtask dist`: the `ext4r` binary as it is shipped. The lab's
//! benchmarks measure this binary; they ask for it with `cargo xtask dist`.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use ext4r_lab::util;

use crate::layout;

/// Builds `ext4r` as it is shipped and returns its path. On glibc Linux the
/// release build itself links it lean (the build script of ext4r-cli, see
/// `crates/ext4r-cli/build.rs`): statically (a static PIE), which spares
/// every run the dynamic loader and the relocation of libc, libm and
/// libgcc_s (about 1 MiB less resident memory, most of a short tool's
/// peak: mkfs.ext4r on 1 TiB 3.9 -> 2.6 MiB), with its relative
/// relocations packed (DT_RELR: a 180 KiB `.rela.dyn` that every run read
/// in full shrinks to 2 KiB), and with the functions of
/// `xtask/hot-symbols.txt` first. What this adds to `cargo build
/// --release`: a second link whose order names each listed function as
/// this build names it (a changed hash found again by the name without
/// it, see layout.rs), in a target directory of its own so that it does
/// not invalidate `target/release`. Elsewhere: the plain release build.
pub fn dist_ext4r() -> Result<PathBuf> {
    if !cfg!(all(target_os = "linux", target_env = "gnu")) {
        let v = util::release_ext4r("")?;
        return Ok(PathBuf::from(&v[0]));
    }
    let dir = util::target_dir().join("dist");
    let bin = dir.join("release").join("ext4r");
    // The same command as `cargo build --release` (so the same crate
    // hashes, and the same names for the list), the order given by file.
    let build = |what: &str, order: Option<&Path>| {
        let mut cmd = util::cargo();
        cmd.args(["build", "--release", "-p", "ext4r-cli"])
            .arg("--target-dir")
            .arg(&dir)
            .env_remove("EXT4R_PLAIN_LINK");
        match order {
            Some(f) => cmd.env("EXT4R_SYMBOL_ORDER", f),
            None => cmd.env_remove("EXT4R_SYMBOL_ORDER"),
        };
        util::run_step(what, &mut cmd)
    };
    let order = layout::current_file(&dir);
    if let Err(e) = build("build ext4r (release)", order.as_deref()) {
        if order.is_none() {
            return Err(e);
        }
        layout::forget(&dir);
        build("build ext4r (release, the list's names)", None)?;
    }
    if !bin.is_file() {
        bail!("{} was not built", bin.display());
    }
    if let Some(order) = layout::new_file(&dir, &bin)? {
        if build(
            "link ext4r (hot functions first, this build's names)",
            Some(&order),
        )
        .is_err()
        {
            println!("note: the link with this build's names failed; kept the list's names");
            layout::forget(&dir);
            build("build ext4r (release, the list's names)", None)?;
        }
    }
    let runs = Command::new(&bin)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !runs {
        bail!("{} does not run", bin.display());
    }
    if !is_static(&bin)? {
        println!(
            "note: {} is dynamically linked (the build script's static link did not work here; \
             its warning says why)",
            bin.display()
        );
    }
    Ok(bin)
}

/// Whether the ELF file at `bin` has no program interpreter (no
/// `PT_INTERP`): statically linked.
pub fn is_static(bin: &Path) -> Result<bool> {
    let data = std::fs::read(bin).with_context(|| format!("read {}", bin.display()))?;
    let u16_at = |o: usize| data.get(o..o + 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
    let u64_at = |o: usize| {
        data.get(o..o + 8)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map(u64::from_le_bytes)
    };
    if data.get(..6) != Some(b"\x7fELF\x02\x01") {
        bail!("{} is not a 64-bit little-endian ELF file", bin.display());
    }
    let (Some(phoff), Some(phentsize), Some(phnum)) = (u64_at(0x20), u16_at(0x36), u16_at(0x38))
    else {
        bail!("{}: truncated ELF header", bin.display());
    };
    let phoff = usize::try_from(phoff)?;
    for i in 0..usize::from(phnum) {
        let at = phoff + i * usize::from(phentsize);
        let Some(kind) = data.get(at..at + 4) else {
            bail!("{}: truncated program headers", bin.display());
        };
        // PT_INTERP
        if kind == [3, 0, 0, 0] {
            return Ok(false);
        }
    }
    Ok(true)
}
