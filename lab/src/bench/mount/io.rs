//! The random 4 KiB I/O of `bench mount`, run as a child inside a mount
//! (`cargo xtask bench mount-io ...`, hidden; the sequential cases use
//! `dd`): the same requests through each driver. Offsets and data come
//! from seeded xorshift64 streams, so every driver sees the same sequence.

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};

/// Bytes per request of the random cases.
pub(crate) const RAND_CHUNK: u64 = 4096;

#[derive(clap::Args)]
pub struct IoArgs {
    #[command(subcommand)]
    op: Op,
}

#[derive(clap::Subcommand)]
enum Op {
    /// OPS reads of 4 KiB at random aligned offsets of FILE.
    Randread { file: PathBuf, ops: u64, seed: u64 },
    /// OPS writes of 4 KiB at random aligned offsets of FILE (its size stays).
    Randwrite { file: PathBuf, ops: u64, seed: u64 },
}

/// xorshift64: fast, and the same stream for every driver.
pub(crate) struct Xorshift(u64);

impl Xorshift {
    pub(crate) fn new(seed: u64) -> Self {
        Xorshift(seed | 1)
    }

    pub(crate) fn next(&mut self) -> u64 {
        let mut s = self.0;
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        self.0 = s;
        s
    }

    fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_exact_mut(8) {
            chunk.copy_from_slice(&self.next().to_le_bytes());
        }
    }
}

pub fn run(args: &IoArgs) -> Result<()> {
    match &args.op {
        Op::Randread { file, ops, seed } => random(file, *ops, *seed, false),
        Op::Randwrite { file, ops, seed } => random(file, *ops, *seed, true),
    }
}

fn random(file: &PathBuf, ops: u64, seed: u64, write: bool) -> Result<()> {
    let f = OpenOptions::new()
        .read(true)
        .write(write)
        .open(file)
        .with_context(|| format!("open {}", file.display()))?;
    let blocks = f.metadata()?.len() / RAND_CHUNK;
    if blocks == 0 {
        bail!("{} is smaller than one block", file.display());
    }
    let mut rng = Xorshift::new(seed);
    let mut data = Xorshift::new(seed ^ 0x5555);
    let mut buf = vec![0u8; RAND_CHUNK as usize];
    for _ in 0..ops {
        let off = (rng.next() % blocks) * RAND_CHUNK;
        if write {
            data.fill(&mut buf);
            f.write_all_at(&buf, off)?;
        } else {
            f.read_exact_at(&mut buf, off)?;
        }
    }
    Ok(())
}
