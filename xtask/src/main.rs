//! `cargo xtask`: project automation for ext4r (see DESIGN.md §4 and §6).
//!
//! - `cargo xtask ci [--quick]`: fmt, clippy, release build, tests.
//! - `cargo xtask fuzz [--secs N] [TARGET...]`: every cargo-fuzz target for N seconds.
//! - `cargo xtask bench mkfs [--sizes 1T,15T] [--runs N] [--dir /dev/shm]`: ours vs mke2fs.
//! - `cargo xtask bench mount [--quick] [--cases ..] [--runs N]`: `ext4r mount` vs fuse2fs vs
//!   the kernel's loop mount (root, /dev/fuse, fuse2fs).
//! - `cargo xtask corpus check|repair [--fsck CMD] …`: a checker's verdicts on the
//!   e2fsprogs test images against e2fsck's; `corpus diff [--mode fn|fy]`: its output.
//! - `cargo xtask zoo [--count N] [--seed S] [--sample] [--jobs J]`: clean images vs our fsck;
//!   `--fast-commit [--racing] [--keep DIR]`: fast-commit cuts recovered four ways.
//! - `cargo xtask dist`: the binary as shipped (static on glibc Linux) with its links; benches use it.
//! - `cargo xtask install [--prefix DIR]`: that binary stripped, its links, man pages, completions.
//! - `cargo xtask fragment [--cases ...] [--seed S]`: fragmented images for the defragmenter.
//! - `cargo xtask damage [--seed N] [--cases K] [--kinds ..] [--jobs J] [--keep DIR]`:
//!   random metadata damage, our repair against e2fsck's, file by file.
//! - `cargo xtask crash [--sample] [--only ..]`: power cuts and the recoveries after them.
//!
//! The build tool is here (ci, dist, install, fuzz, layers, layout); the
//! verification lab (bench, corpus, zoo, fragment, damage, crash) is the
//! `ext4r-lab` crate under `lab/`, and this binary only parses its arguments
//! and runs it.

mod ci;
mod dist;
mod fuzz;
mod install;
mod layers;
mod layout;
mod testrun;

use clap::{Parser, Subcommand};
use ext4r_lab::{bench, corpus, crash, damage, fragment, util, zoo};

#[derive(Parser)]
#[command(
    name = "cargo xtask",
    bin_name = "cargo xtask",
    about = "ext4r project automation"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the CI checks: fmt, clippy, release build, tests (stops at the first failure).
    Ci(ci::Args),
    /// Run every cargo-fuzz target under fuzz/ for a while; fail if any crashes.
    Fuzz(fuzz::Args),
    /// Compare an ext4r tool against its e2fsprogs counterpart, alternating runs.
    Bench(bench::Args),
    /// Agreement of a checker's verdicts with e2fsck's on the e2fsprogs test images.
    Corpus(corpus::Args),
    /// Fragmented images written by the kernel (cached in /dev/shm/ext4r-defrag).
    Fragment(fragment::Args),
    /// Build `ext4r` as it is shipped (static on glibc Linux), link its tool names
    /// beside it, and print its path.
    Dist,
    /// Match the names of xtask/hot-symbols.txt (the functions linked first)
    /// to the release binary's; --check only counts them (CI).
    HotSymbols(layout::HotArgs),
    /// Install the stripped binary, its tool names, man pages and shell completions.
    Install(install::Args),
    /// Power cuts at every write of tune, fsck and the write layer, and the recoveries after them.
    Crash(crash::Args),
    /// Fail when product code writes to a device or stamps a checksum outside the write
    /// layer, or uses `unsafe` outside the listed modules.
    Layers,
    /// The workspace's tests, several test binaries at a time, then the doc tests.
    Test(testrun::Args),
    /// Clean images across the mke2fs feature matrix: our fsck must agree they are clean.
    Zoo(zoo::Args),
    /// Random metadata damage: our repair against e2fsck's, file by file.
    Damage(damage::Args),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Ci(args) => ci::run(&args),
        Command::Fuzz(args) => fuzz::run(&args),
        Command::Bench(args) => bench::run(&args),
        Command::Corpus(args) => corpus::run(&args),
        Command::Zoo(args) => zoo::run(&args),
        Command::Layers => layers::run(),
        Command::Test(args) => testrun::run(&args),
        Command::Fragment(args) => fragment::run(&args),
        Command::Crash(args) => crash::run(&args),
        Command::Damage(args) => damage::run(&args),
        Command::Dist => dist::dist_ext4r().and_then(|bin| {
            let dir = bin.parent().unwrap_or(std::path::Path::new("."));
            install::make_links(&bin, dir)?;
            println!("{}", bin.display());
            Ok(())
        }),
        Command::Install(args) => install::run(&args),
        Command::HotSymbols(args) => layout::hot_symbols(&args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("xtask: error: {err:#}");
            if util::interrupted() {
                std::process::ExitCode::from(130)
            } else {
                std::process::ExitCode::FAILURE
            }
        }
    }
}
