//! `cargo xtask install [--prefix DIR]`: the shipped binary, stripped,
//! with its dotted names, man pages and shell completions.
//!
//! Layout under the prefix (default /usr/local):
//!
//! - `sbin/ext4r` and the links `mkfs.ext4r`, `fsck.ext4r`, `tune.ext4r`,
//!   `e4defrag-r`, `resize.ext4r` to it (util-linux's `mkfs -t ext4r` runs `mkfs.ext4r`
//!   from /sbin, /sbin/fs.d, /sbin/fs or `$PATH`; see the README for what
//!   `fsck` does);
//! - `share/man/man8/*.8`, `share/man/man1/*.1`;
//! - `share/bash-completion/completions/NAME`, `share/zsh/site-functions/_NAME`,
//!   `share/fish/vendor_completions.d/NAME.fish`.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use ext4r_lab::util;

/// The names the tools are installed under. A name the binary does not
/// (yet) answer to is skipped with a note: `e4defrag-r` gets its link in
/// the build that has the defragmenter.
pub const LINKS: &[&str] = &[
    "mkfs.ext4r",
    "fsck.ext4r",
    "tune.ext4r",
    "e4defrag-r",
    "resize.ext4r",
];

#[derive(clap::Args)]
pub struct Args {
    /// Where to install (sbin/, share/man/, share/*completion*/ under it).
    #[arg(long, default_value = "/usr/local")]
    prefix: PathBuf,
}

/// The link names the binary at `bin` dispatches on.
pub fn known_links(bin: &Path) -> Result<Vec<String>> {
    let out = Command::new(bin)
        .args(["--generate", "links"])
        .output()
        .with_context(|| format!("running {}", bin.display()))?;
    if !out.status.success() {
        bail!("{} --generate links failed", bin.display());
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect())
}

/// Makes `dir/NAME -> ext4r` for each name of [`LINKS`] the binary knows;
/// returns the names linked.
pub fn make_links(bin: &Path, dir: &Path) -> Result<Vec<&'static str>> {
    let known = known_links(bin)?;
    let mut made = Vec::new();
    for name in LINKS {
        let link = dir.join(name);
        if !known.iter().any(|k| k == name) {
            eprintln!("install: {name}: not in this build of ext4r, no link made");
            continue;
        }
        match std::fs::remove_file(&link) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("removing {}", link.display())),
        }
        std::os::unix::fs::symlink("ext4r", &link)
            .with_context(|| format!("linking {}", link.display()))?;
        made.push(*name);
    }
    Ok(made)
}

fn copy_tree(from: &Path, to: &Path) -> Result<usize> {
    std::fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
    let mut n = 0;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        std::fs::copy(e.path(), to.join(e.file_name()))
            .with_context(|| format!("copying {}", e.path().display()))?;
        n += 1;
    }
    Ok(n)
}

pub fn run(args: &Args) -> Result<()> {
    let built = crate::dist::dist_ext4r()?;
    let prefix = &args.prefix;
    let sbin = prefix.join("sbin");
    std::fs::create_dir_all(&sbin).with_context(|| format!("creating {}", sbin.display()))?;
    let bin = sbin.join("ext4r");
    // Written beside and renamed over: a running ext4r keeps its file.
    let tmp = sbin.join(".ext4r.new");
    std::fs::copy(&built, &tmp).with_context(|| format!("copying to {}", tmp.display()))?;
    // The release profile keeps line tables for backtraces in development;
    // what is installed has no symbols or debug info.
    util::run_step("strip", Command::new("strip").arg("--strip-all").arg(&tmp))
        .context("strip (binutils) is needed to install")?;
    std::fs::rename(&tmp, &bin)?;
    let links = make_links(&bin, &sbin)?;

    let work = util::target_dir().join("xtask-install");
    let _ = std::fs::remove_dir_all(&work);
    let man = work.join("man");
    let comp = work.join("completions");
    for (what, dir) in [("man", &man), ("completions", &comp)] {
        util::run_step(
            &format!("generate {what}"),
            Command::new(&bin).args(["--generate", what]).arg(dir),
        )?;
    }
    let share = prefix.join("share");
    let mut pages = Vec::new();
    for e in std::fs::read_dir(&man)? {
        let p = e?.path();
        let sec = p
            .extension()
            .and_then(|s| s.to_str())
            .unwrap_or("1")
            .to_string();
        let dir = share.join("man").join(format!("man{sec}"));
        std::fs::create_dir_all(&dir)?;
        let to = dir.join(p.file_name().context("page name")?);
        std::fs::copy(&p, &to)?;
        pages.push(to);
    }
    pages.sort();
    let bash = share.join("bash-completion/completions");
    let zsh = share.join("zsh/site-functions");
    let fish = share.join("fish/vendor_completions.d");
    let n = copy_tree(&comp.join("bash"), &bash)?
        + copy_tree(&comp.join("zsh"), &zsh)?
        + copy_tree(&comp.join("fish"), &fish)?;

    let size = std::fs::metadata(&bin)?.len();
    println!("\ninstalled under {}:", prefix.display());
    println!(
        "  {} ({:.1} MiB, stripped)",
        bin.display(),
        size as f64 / (1 << 20) as f64
    );
    println!("  links: {}", links.join(", "));
    for p in &pages {
        println!("  {}", p.display());
    }
    println!(
        "  {n} completion files in {}, {}, {}",
        bash.display(),
        zsh.display(),
        fish.display()
    );
    Ok(())
}
