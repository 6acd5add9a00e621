//! `e4defrag-r` on an unmounted device or image: files defragmented,
//! trees placed in read order (`-r`) and free space gathered (`-f`) by
//! moving blocks through the write layer. The output follows the online
//! run's: one line per file worked on, then the figures.

use std::path::Path;
use std::time::Instant;

use ext4r_defrag::freespace::FreeSpace;
use ext4r_defrag::image::ImageFs;
use ext4r_defrag::offline::compact::compact;
use ext4r_defrag::offline::mover::{plan, OfflineMover};
use ext4r_defrag::offline::relevant::place;
use ext4r_defrag::offline::{OfflineFs, OfflineOptions};
use ext4r_defrag::online::{run as run_plan, Outcome, RunOptions};
use ext4r_defrag::source::Source;

use crate::defrag::OnlineArgs;

/// Works on one unmounted target; false when it could not be worked on or
/// a file failed.
pub(crate) fn run(a: &OnlineArgs, dev: &Path) -> bool {
    let started = Instant::now();
    let mut fs = match OfflineFs::open_path(dev, OfflineOptions::default()) {
        Ok(fs) => fs,
        Err(ext4r_defrag::Error::Engine {
            source: e @ ext4r::Error::Locked { .. },
            ..
        }) => {
            eprintln!("e4defrag-r: {e}");
            return false;
        }
        Err(e) => {
            eprintln!("e4defrag-r: {}", crate::errors::message(&e));
            return false;
        }
    };
    let src = match fs.source().and_then(|s| match &a.path {
        Some(p) => s.with_order(a.order).with_start(p),
        None => Ok(s.with_order(a.order)),
    }) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("e4defrag-r: {}", crate::errors::message(&e));
            return false;
        }
    };
    let ok = if a.free_space {
        free_space(a, &mut fs, &src, dev, started)
    } else if a.relevant {
        relevant(a, &mut fs, &src, dev, started)
    } else {
        defrag(a, &mut fs, &src, dev, started)
    };
    drop(src);
    match fs.close() {
        Ok(()) => ok,
        Err(e) => {
            eprintln!("e4defrag-r: {}", crate::errors::message(&e));
            false
        }
    }
}

fn defrag(a: &OnlineArgs, fs: &mut OfflineFs, src: &ImageFs, dev: &Path, started: Instant) -> bool {
    println!(
        "ext4 defragmentation for device({}), offline",
        dev.display()
    );
    let p = match plan(src, a.to_extents) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("e4defrag-r: {}", crate::errors::message(&e));
            return false;
        }
    };
    if a.verbose {
        for (e, why) in &p.skipped {
            println!(" {}: skipped: {why}", e.display());
        }
        for (e, n) in &p.already_best {
            println!(" {}: {n} extents: already as few as possible", e.display());
        }
    }
    let mut mover = match OfflineMover::new(fs, src.best_rule(), a.to_extents) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("e4defrag-r: {}", crate::errors::message(&e));
            return false;
        }
    };
    let opts = RunOptions {
        deadline: a.deadline,
        ..RunOptions::default()
    };
    let bar = crate::defrag_bar::Bar::new();
    let s = run_plan(&p, &mut mover, &opts, &mut |i, n, c, o| {
        bar.step(i, n, Some(format!("[{i}/{n}] {}: {o}", c.entry.display())));
    });
    bar.finish();
    crate::defrag_online::summary(&s, &p, started);
    s.failed == 0
}

fn relevant(
    a: &OnlineArgs,
    fs: &mut OfflineFs,
    src: &ImageFs,
    dev: &Path,
    started: Instant,
) -> bool {
    println!(
        "ext4 relevant-file placement for directory({}) of device({}), offline",
        a.path.as_deref().unwrap_or("/"),
        dev.display()
    );
    let verbose = a.verbose;
    let bar = crate::defrag_bar::Bar::new();
    let r = place(fs, src, a.deadline, &mut |i, n, path, o| {
        let moved = matches!(o, Outcome::Improved { .. } | Outcome::Unchanged { .. });
        bar.step(
            i,
            n,
            (verbose || !moved).then(|| format!("[{i}/{n}] {path}: {o}")),
        );
    });
    bar.finish();
    let r = match r {
        Ok(r) => r,
        Err(e) => {
            eprintln!("e4defrag-r: {}", crate::errors::message(&e));
            return false;
        }
    };
    println!();
    if r.already_in_order {
        println!(
            " Already in read order:\t\t{} files, nothing moved",
            r.files
        );
    } else {
        println!(
            " Files placed:\t\t\t{} of {} ({} blocks), in {} free runs",
            r.placement.placed, r.files, r.placement.blocks, r.placement.donor_extents
        );
    }
    if r.placement.timed_out {
        println!(" Stopped at the time limit.");
    }
    println!(
        " Gaps between files in read order:\t{} -> {} blocks",
        r.before.between_files, r.after.between_files
    );
    println!(
        " Seek distance reading in order:\t{} -> {} blocks ({} -> {} jumps)",
        r.before.total, r.after.total, r.before.jumps, r.after.jumps
    );
    println!(" Time:\t\t\t\t{:.2} s", started.elapsed().as_secs_f64());
    r.placement
        .skipped
        .iter()
        .all(|(_, why)| !why.starts_with("failed"))
}

fn largest_line(f: &FreeSpace) -> String {
    let kb = u64::from(f.block_size) / 1024;
    let pct = if f.free_blocks == 0 {
        100.0
    } else {
        f.max as f64 * 100.0 / f.free_blocks as f64
    };
    format!(
        "{} KB of {} KB free ({pct:.1}%), {} free extents",
        f.max * kb,
        f.free_blocks * kb,
        f.extents
    )
}

fn free_space(
    a: &OnlineArgs,
    fs: &mut OfflineFs,
    src: &ImageFs,
    dev: &Path,
    started: Instant,
) -> bool {
    println!(
        "ext4 free-space defragmentation for device({}), offline",
        dev.display()
    );
    let verbose = a.verbose;
    let bar = crate::defrag_bar::Bar::new();
    let r = compact(fs, src, a.deadline, &mut |i, n, path, o| {
        let say = verbose || matches!(o, Outcome::Failed(_) | Outcome::Stopped { .. });
        bar.step(i, n, say.then(|| format!("[{i}/{n}] {path}: {o}")));
    });
    bar.finish();
    let r = match r {
        Ok(r) => r,
        Err(e) => {
            eprintln!("e4defrag-r: {}", crate::errors::message(&e));
            return false;
        }
    };
    let bs = u64::from(r.before.block_size);
    println!();
    match r.window {
        Some((s, n)) => println!(
            " Window emptied:\t\tblocks {s}-{} ({} KB; the largest stretch without \
             immovable blocks is {} KB)",
            s + n - 1,
            n * bs / 1024,
            r.largest_segment * bs / 1024
        ),
        None => println!(" Nothing to move: the free space is as gathered as it can be."),
    }
    println!(
        " Files moved:\t\t\t{} ({} blocks), their extents {} -> {}",
        r.files_moved, r.blocks_moved, r.extents.0, r.extents.1
    );
    for (p, why) in &r.not_moved {
        println!(" {}: left in the window: {why}", p.display());
    }
    for (p, why) in &r.failed {
        println!(" {}: failed: {why}", p.display());
    }
    if r.timed_out {
        println!(" Stopped at the time limit.");
    }
    println!(" Largest free extent before:\t{}", largest_line(&r.before));
    println!(" Largest free extent after:\t{}", largest_line(&r.after));
    println!("\nBefore:\n{}", r.before.histogram());
    println!("After:\n{}", r.after.histogram());
    println!(" Time:\t\t\t\t{:.2} s", started.elapsed().as_secs_f64());
    r.failed.is_empty()
}
