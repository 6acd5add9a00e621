//! `cargo xtask`: project automation for ext4r (see DESIGN.md §4 and §6).
//!
//! - `cargo xtask ci [--quick]`: fmt, clippy, release build, tests.
//! - `cargo xtask fuzz [--secs N] [TARGET...]`: every cargo-fuzz target for N seconds.
//! - `cargo xtask bench mkfs [--sizes 1T,15T] [--runs N] [--dir /dev/shm]`: ours vs mke2fs.
//! - `cargo xtask corpus check|repair [--fsck CMD] …`: a checker's verdicts on the
//!   e2fsprogs test images against e2fsck's.
//! - `cargo xtask zoo [--count N] [--seed S] [--sample] [--jobs J]`: clean images vs our fsck.
//! - `cargo xtask damage [--seed N] [--cases K] [--kinds ..] [--jobs J] [--keep DIR]`:
//!   random metadata damage, our repair against e2fsck's, file by file.
//! - `cargo xtask dist`: the binary as shipped (static on glibc Linux); benches use it.

mod bench;
mod ci;
mod corpus;
mod damage;
mod fuzz;
mod measure;
mod util;
mod zoo;

use clap::{Parser, Subcommand};

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
    /// Build `ext4r` as it is shipped (static on glibc Linux) and print its path.
    Dist,
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
        Command::Damage(args) => damage::run(&args),
        Command::Dist => util::dist_ext4r().map(|bin| println!("{}", bin.display())),
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
