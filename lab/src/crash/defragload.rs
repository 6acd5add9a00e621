//! Workload (e): an offline e4defrag-r run — files defragmented, the
//! tree placed in read order (`-r`), the free space gathered (`-f`) —
//! on a kernel-filled image first fragmented through the write layer.
//! After a cut, whatever recovered the image, every file must hash as
//! before: each move is data copied to free blocks first, then the mapping
//! switched in one journaled transaction.

use super::image::Rng;
use anyhow::{bail, Result};
use ext4r::device::{BlockDevice, MemDevice};
use ext4r::write::{NewNode, WriteFs, WriteOptions};
use ext4r_defrag::offline::{compact, mover, relevant, OfflineFs, OfflineOptions};
use ext4r_defrag::online::{run as run_plan, RunOptions};
use ext4r_defrag::source::Source;
use std::path::Path;
use std::sync::Arc;

/// `base` with a few files grown in turns (each round committed), so that
/// their blocks interleave: something for the defragmenter to do.
pub fn fragment(base: MemDevice, seed: u64) -> Result<MemDevice> {
    let mut o = WriteOptions::default();
    o.now = Some((1_700_000_000, 0));
    let dev = Arc::new(base);
    let mut fs = WriteFs::open(dev.clone(), o)?;
    let mut rng = Rng(seed | 1);
    let files: Vec<u32> = (0..6)
        .map(|i| fs.create(2, format!("frag{i}").as_bytes(), &NewNode::file(0o644)))
        .collect::<Result<_, _>>()?;
    let mut sizes = vec![0u64; files.len()];
    for _ in 0..30 {
        for (k, &ino) in files.iter().enumerate() {
            let n = 1 + rng.below(12_000) as usize;
            let data: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
            fs.write(ino, sizes[k], &data)?;
            sizes[k] += n as u64;
        }
        fs.sync()?;
    }
    fs.close()?;
    Ok(dev.snapshot())
}

/// The offline run, as `e4defrag-r IMG`, `-r IMG` and `-f IMG` would make
/// it.
pub fn run(dev: Arc<dyn BlockDevice>) -> Result<()> {
    let opts = OfflineOptions {
        now: Some((1_700_000_000, 0)),
    };
    let mut fs = OfflineFs::open(dev, Path::new("crash"), opts)?;
    let src = fs.source()?;
    let plan = mover::plan(&src, false)?;
    let rule = src.best_rule();
    let mut m = mover::OfflineMover::new(&mut fs, rule, false)?;
    let s = run_plan(&plan, &mut m, &RunOptions::default(), &mut |_, _, _, _| {});
    if s.failed > 0 || s.improved == 0 {
        bail!("the defragmentation did not go as planned: {s:?}");
    }
    let src = fs.source()?;
    relevant::place(&mut fs, &src, None, &mut |_, _, _, _| {})?;
    let src = fs.source()?;
    let r = compact::compact(&mut fs, &src, None, &mut |_, _, _, _| {})?;
    if !r.failed.is_empty() {
        bail!("-f failed on {:?}", r.failed);
    }
    drop(src);
    fs.close()?;
    Ok(())
}
